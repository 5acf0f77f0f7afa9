"""The writer killed while it writes a refused batch one record at a time loses nothing and doubles
nothing, and the batch chain still verifies.

After the Ledger refuses a batch for its content (not an outage), the writer commits its records one
per batch (`refusals.one_by_one`), each at its own position. Killed part-way, none of those records
is acknowledged yet: the proxy hands the whole frame to the restarted writer, which starts at the
position the Ledger last committed, finds the records already stored (their event ids), refuses the
bad one again and files it as `capture.unrecordable` once. The Ledger refuses the bad record with a
real trigger on its `batches` table (any batch that would insert that event), on SQLite and
PostgreSQL; the writer is the real child process behind the real `WriterProcess`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from recording.events import Processing
from recording.identity import Identity
from recording.records import Exchange, RequestRecord
from recording.writer.process import WriterProcess, WriterSpec
from storage.ledger import Ledger, open_ledger

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

RECORDS = 500
BAD = 250
SQLITE_REFUSE = """
CREATE TRIGGER test_refuse_bad BEFORE INSERT ON batches
WHEN instr(NEW.event_ids, '"bad-flow:') > 0
BEGIN SELECT RAISE(ABORT, 'test: the bad record is refused'); END
"""
PG_REFUSE = (
    "CREATE TABLE test_outage (on_now int)",
    "CREATE FUNCTION test_refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " IF strpos(NEW.event_ids, '\"bad-flow:') > 0 THEN"
    " RAISE EXCEPTION 'test: the bad record is refused' USING ERRCODE = 'check_violation'; END IF;"
    " IF EXISTS (SELECT 1 FROM test_outage) THEN"
    " RAISE EXCEPTION 'test: no space left' USING ERRCODE = 'disk_full'; END IF;"
    " RETURN NEW; END $$",
    "CREATE TRIGGER test_refuse_bad BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION test_refuse_bad()",
)


def _record(n: int) -> RequestRecord:
    flow = "bad-flow" if n == BAD else f"flow-{n}"
    ex = Exchange(flow, "out", "POST", f"http://h/{n}", "h", Identity(agent="w"))
    return RequestRecord(ex, time.time(), b"POST /%d HTTP/1.1\r\nHost: h\r\n\r\n" % n, b"body %d" % n)


def _refusing(ledger_url: str, blobs: str) -> None:
    """The Ledger's schema, plus a trigger refusing every batch that would insert the bad record (on
    PostgreSQL also failing every batch with `disk_full` while `test_outage` has a row)."""
    ledger = open_ledger(ledger_url, blobs)
    with ledger.engine.begin() as c:
        for statement in PG_REFUSE if ledger.engine.dialect.name == "postgresql" else (SQLITE_REFUSE,):
            c.exec_driver_sql(statement)
    ledger.close()


def _singles(ledger: Ledger) -> int:
    """Batches of one record: how far the one-by-one fallback has come."""
    with ledger.engine.connect() as c:
        return int(c.execute(text("SELECT count(*) FROM batches WHERE received = 1")).scalar() or 0)


async def _fault_mid_fallback(ledger_url: str, blobs: str, fault: str) -> int:
    """Put every record in one frame; once the fallback has written some of them one by one (not
    all), SIGKILL the writer (`kill`: the proxy side restarts it) or make the Ledger report a full
    disk for 3 s (`outage`: the writer waits it out); then drain. The single batches seen then."""
    writer = WriterProcess(
        WriterSpec(ledger_url=ledger_url, blobs_url=blobs, collector="w1b1"),
        Processing(),
        lambda retry: open_ledger(ledger_url, blobs, retry_seconds=retry),
    )
    await writer.start()
    assert writer._proc is not None
    first = writer._proc.pid
    for n in range(RECORDS):
        writer.put(_record(n))
    watch = open_ledger(ledger_url, blobs)
    seen = 0
    deadline = time.monotonic() + 60
    while (seen := _singles(watch)) < 20 and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    if fault == "kill":
        os.kill(first, signal.SIGKILL)
    else:
        with watch.engine.begin() as c:
            c.exec_driver_sql("INSERT INTO test_outage VALUES (1)")
        await asyncio.sleep(3.0)
        with watch.engine.begin() as c:
            c.exec_driver_sql("DELETE FROM test_outage")
    watch.close()
    deadline = time.monotonic() + 20
    while (
        fault == "kill"
        and (writer._proc.pid == first or writer._pipe is None)
        and time.monotonic() < deadline
    ):
        await asyncio.sleep(0.05)
    await writer.stop(timeout=60)
    assert fault != "kill" or writer._proc.pid != first, "a new writer process was started"
    return seen


def _check(ledger_url: str, blobs: str) -> None:
    """Each good record exactly once, the refused one filed once, no batch position used twice by the
    collector, and `flightlog ledger verify` passes with every event chained (run where the writer
    ran: its FLIGHTLOG_HOME holds the collector's chain key)."""
    ledger = open_ledger(ledger_url, blobs)
    with ledger.engine.connect() as c:
        rows = c.execute(text("SELECT action_id, kind FROM events")).all()
        reused = c.execute(
            text(
                "SELECT position FROM batches WHERE collector = 'w1b1' GROUP BY position HAVING count(*) > 1"
            )
        ).all()
    ledger.close()
    requests = [a for a, kind in rows if kind == "http.request"]
    filed = [a for a, kind in rows if kind == "capture.unrecordable"]
    good = {f"flow-{n}" for n in range(RECORDS) if n != BAD}
    assert sorted(requests) == sorted(good), "each good record exactly once"
    assert filed == ["bad-flow"], filed
    assert reused == [], f"batch positions used twice: {reused}"

    env = {
        **os.environ,
        "FLIGHTLOG_LEDGER": ledger_url,
        "FLIGHTLOG_BLOBS": blobs,
    }
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "ledger", "verify", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["ok"] is True, done.stdout[-2000:]
    assert report["chain"]["ok"] is True and report["chain"]["events"] == RECORDS, report["chain"]


def test_writer_killed_mid_one_by_one_loses_nothing_doubles_nothing_and_verifies(
    ledger_url: str, tmp_path: Path
) -> None:
    """500 records in one batch, one of them refused: the writer is killed after it has written at
    least 20 (and not all) of them one by one; the restarted writer leaves each of the 499 recorded
    exactly once, the refused one filed once as `capture.unrecordable`, no batch position used twice,
    and `flightlog ledger verify` passes."""
    blobs = (tmp_path / "blobs").as_uri()
    _refusing(ledger_url, blobs)
    seen = asyncio.run(_fault_mid_fallback(ledger_url, blobs, "kill"))
    assert 20 <= seen < RECORDS, f"killed in the one-by-one fallback ({seen} single batches)"
    _check(ledger_url, blobs)


def test_an_outage_mid_one_by_one_is_retried_from_the_same_positions(
    pg_url: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The same batch, but mid-fallback the Ledger reports a full disk for 3 s (PostgreSQL's own
    `disk_full`): the writer waits it out and retries the batch from the position it started at, so
    the records it had already written one by one are the same batches again (same position, same
    events: the same batch id) and add nothing; everything else as above."""
    blobs = (tmp_path / "blobs").as_uri()
    _refusing(pg_url, blobs)
    seen = asyncio.run(_fault_mid_fallback(pg_url, blobs, "outage"))
    assert 20 <= seen < RECORDS, f"the outage began in the one-by-one fallback ({seen} single batches)"
    said = capfd.readouterr().err  # the writer child's log lines
    assert said.count("ledger unavailable (DiskFull") == 1 and "ledger is back" in said, said[-2000:]
    _check(pg_url, blobs)
