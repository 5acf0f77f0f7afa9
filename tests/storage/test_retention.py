"""Retention that verifies, on SQLite + a blob folder and PostgreSQL + S3 (moto's server mode).

A Ledger with one old small payload (inline), one large one (in the blob store) and one recent one:
the policy prunes the old one, `ledger erase` the large one. Then `verify` is ok and says two were
pruned; every read path (row, blob, JSONL and HAR exports, replay, the route, the browser) shows
"pruned on DATE (reason)" where the bytes were; the events stay. A blob deleted or emptied by hand,
with no signed record, still fails verify; the append-only trigger refuses emptying bytes any other way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from storage.chain.signing import LedgerKeys
from storage.chain.verify import verify
from storage.errors import PrunedPayload
from storage.events import INLINE_MAX
from storage.ledger import Ledger, open_ledger
from storage.reader import reading
from storage.retention.policy import Policy, due_payloads
from storage.retention.prune import prune
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer

OLD = datetime.now(UTC) - timedelta(days=40)
LARGE = os.urandom(INLINE_MAX + 1000)


@dataclass
class Kept:
    ledger: Ledger
    url: str
    blobs: str
    home: Path
    old: str
    large: str
    recent: str


@pytest.fixture
def kept(ledger_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Kept]:
    home = tmp_path / "home"
    if ledger_url.startswith("sqlite"):
        blobs = (tmp_path / "blobs").as_uri()
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        blobs = f"s3://ledger/prefix?endpoint={endpoint}"
    ledger = open_ledger(ledger_url, blobs, keys=LedgerKeys(home))
    events = [
        event(0, payload=b'{"old": "personal data"}', at=OLD, agent="alpha"),
        event(1, payload=LARGE, at=OLD + timedelta(seconds=1), agent="alpha"),
        event(2, payload=b'{"recent": true}', at=datetime.now(UTC), agent="alpha"),
    ]
    ledger.append(batch(events))
    with ledger.engine.connect() as conn:
        shas = [r[0] for r in conn.exec_driver_sql("SELECT payload_sha256 FROM events ORDER BY event_id")]
    yield Kept(ledger, ledger_url, blobs, home, *shas)
    ledger.close()


def cli(k: Kept, *args: str) -> subprocess.CompletedProcess[str]:
    env = {n: v for n, v in os.environ.items() if not n.startswith("FLIGHTLOG_")}
    env["FLIGHTLOG_HOME"] = str(k.home)
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, timeout=120, env=env
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def pruned_both(k: Kept) -> None:
    with reading(k.ledger.engine) as reader:
        due = [
            r["sha256"]
            for r in due_payloads(reader, Policy(older_than_days=30, larger_than=None), datetime.now(UTC))
        ]
    assert sorted(due) == sorted([k.old, k.large])  # the policy: both old ones, not the recent one
    prune(k.ledger, [k.old], "retention: older than 30 days")
    done = cli(
        k, "ledger", "erase", k.large, "--reason", "erasure request 7", "--ledger", k.url, "--blobs", k.blobs
    )
    assert done.returncode == 0 and f"pruned {k.large}" in done.stdout, done.stderr


def test_pruned_payloads_verify_and_every_reader_says_so(kept: Kept) -> None:
    """After a policy prune and an erase, verify is ok and counts them as pruned; each read path
    shows "pruned on DATE (reason)" instead of bytes; the recent payload reads as before."""
    k = kept
    pruned_both(k)
    report = verify(k.ledger)
    assert report.ok, report.chain.problems
    assert sorted(p.sha256 for p in report.pruned) == sorted([k.old, k.large]) and not report.pruned_pending
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    note = f"pruned on {today} (erasure request 7)"
    with pytest.raises(PrunedPayload, match=r"pruned on .* \(erasure request 7\)"):
        k.ledger.payload(k.large)
    assert k.ledger.payload(k.recent) == b'{"recent": true}'
    row = cli(k, "ledger", "row", "ev-000001", "--ledger", k.url)
    assert note in row.stdout and "payload: complete" in row.stdout
    blob = cli(k, "ledger", "blob", k.large, "--ledger", k.url, "--blobs", k.blobs)
    assert blob.returncode == 1 and note in blob.stderr and blob.stdout == ""
    jsonl = cli(k, "export", "--format", "jsonl", "--ledger", k.url, "--blobs", k.blobs)
    lines = {e["event_id"]: e for e in map(json.loads, jsonl.stdout.splitlines())}
    assert lines["ev-000001"]["pruned"] == note and lines["ev-000001"]["payload"] is None
    assert lines["ev-000000"]["pruned"] == f"pruned on {today} (retention: older than 30 days)"
    har = cli(k, "export", "--format", "har", "--ledger", k.url, "--blobs", k.blobs)
    assert note in har.stdout
    replayed = cli(
        k, "replay", "act-000000", "--to", "http://127.0.0.1:9", "--ledger", k.url, "--blobs", k.blobs
    )
    assert replayed.returncode != 0 and "pruned on" in replayed.stderr
    from readback.ledger_routes import _blob

    status, _, body = _blob(k.ledger, k.large)
    assert status == 410 and b"pruned on" in body


def test_a_blob_removed_by_hand_still_fails_verify(kept: Kept) -> None:
    """With no signed record: an object deleted from the blob store is `missing`, inline bytes
    emptied past the triggers are `corrupted`; a `pruned` mark forged for them is named too."""
    k = kept
    k.ledger.blobs.delete(k.large)
    Tamperer(k.url).run(
        f"UPDATE blobs SET data = x'' WHERE sha256 = '{k.old}'"
        if k.url.startswith("sqlite")
        else f"UPDATE blobs SET data = ''::bytea WHERE sha256 = '{k.old}'",
        drop=("blobs_no_update",),
    )
    report = verify(k.ledger)
    assert not report.ok and report.missing == [k.large] and report.corrupted == [k.old]
    Tamperer(k.url).run(
        "INSERT INTO pruned (sha256, event_id, pruned_at, reason)"
        f" VALUES ('{k.old}', 'x', '2026-01-01', 'forged')"
    )
    report = verify(k.ledger)
    assert (
        f"forged: payload {k.old} is marked pruned, but no signed prune record names it"
        in report.chain.problems
    )


def test_the_trigger_lets_bytes_be_emptied_only_under_a_pruned_mark(kept: Kept) -> None:
    """Through flightlog's own connection (triggers on), emptying a payload's bytes is refused unless
    `pruned` names it; deleting a blob row is refused always."""
    k = kept
    with pytest.raises(DBAPIError, match="append-only"), k.ledger.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE blobs SET data = {'?' if k.url.startswith('sqlite') else '%s'}"
            f" WHERE sha256 = '{k.recent}'",
            (b"",),
        )
    pruned_both(k)
    with pytest.raises(DBAPIError, match="append-only"), k.ledger.engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM blobs WHERE sha256 = '{k.old}'")
    assert verify(k.ledger).ok


def test_du_says_what_is_held_and_what_the_policy_frees(kept: Kept) -> None:
    """`ledger du` counts payloads by age and agent, and what the policy in FLIGHTLOG_HOME would free;
    after the pruning the freed bytes are counted as pruned."""
    k = kept
    k.home.mkdir(parents=True, exist_ok=True)
    (k.home / "retention.toml").write_text("older_than_days = 30\n[agents]\nbeta = 1\n")
    before = json.loads(
        cli(k, "ledger", "du", "--by", "age", "--by", "agent", "--json", "--ledger", k.url).stdout
    )
    assert before["held"]["payloads"] == 3
    assert {g["key"]: g["payloads"] for g in before["by"]["age"]} == {"under a day": 1, "30-90 days": 2}
    assert before["policy"]["payloads"] == 2 and before["policy"]["bytes"] == len(LARGE) + 24
    done = cli(k, "ledger", "prune", "--ledger", k.url, "--blobs", k.blobs)
    assert done.returncode == 0 and "pruned 2 payloads" in done.stdout, done.stderr
    after = json.loads(cli(k, "ledger", "du", "--json", "--ledger", k.url).stdout)
    assert after["pruned"]["payloads"] == 2 and after["policy"]["payloads"] == 0
    assert verify(k.ledger).ok
