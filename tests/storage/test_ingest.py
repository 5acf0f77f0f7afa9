"""The fast event-row path (issue 14) on both engines: every row and id stored as offered, the partial
indexes of sparse columns hold exactly the rows with a value and still serve their reads, the chain
over rows hashed while they were sent verifies and still finds a forged row, a re-delivery adds
nothing, and (PostgreSQL) a row another writer commits between the id check and the COPY sends the
batch through the `ON CONFLICT` path instead of failing it.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from storage import event_sql
from storage.append import HASH_APART_MIN, hash_apart
from storage.chain.rederive import verify_chain
from storage.events import AppendResult, Event
from storage.ledger import Ledger, open_ledger
from storage.rows import COLUMNS, to_row
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer

N = 250
SPARSE_INDEXES = {
    "status": "ix_events_status",
    "tool": "ix_events_tool_at",
    "task": "ix_events_task_at",
    "last_byte_ms": "ix_events_last_byte_ms",
}


def mixed(i: int) -> Event:
    """Event i with the sparse columns filled on some rows only (requests have no status)."""
    extra: dict[str, Any] = {}
    if i % 5 == 0:
        extra["tool"] = f"tool-{i % 3}"
    if i % 7 == 0:
        extra["task"] = "t1"
    if i % 2 == 1:
        extra["last_byte_ms"] = float(i)
        extra["first_byte_ms"] = i / 2
    return event(i, payload=f'{{"n": {i}}}'.encode(), tokens_in=i, cost_usd=0.25, **extra)


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The way each write attempt took from now on, in order: True careful (`staged`), False direct."""
    from storage import ledger as ledger_module

    taken: list[bool] = []
    real = ledger_module.write_batch

    def spy(*args: Any, staged: bool, **kwargs: Any) -> Any:
        taken.append(staged)
        return real(*args, staged=staged, **kwargs)

    monkeypatch.setattr(ledger_module, "write_batch", spy)
    return taken


def problems(ledger: Ledger) -> list[str]:
    from tests.storage.tamper import held, roots

    with ledger.engine.connect() as conn:
        return verify_chain(conn, (), keys=held(ledger), roots=roots(ledger)).problems


def test_every_row_reads_back_as_offered(ledger: Ledger) -> None:
    """A 250-event batch (in shuffled order) stores every id once and every column as `to_row`
    gave it: the read-back event's columns equal the offered ones, time included."""
    events = [mixed(i) for i in range(N)]
    offered = list(reversed(events[::2])) + events[1::2]
    result = ledger.append(batch(offered))
    assert (result.received, result.new, result.duplicates, result.conflicts) == (N, N, 0, ())
    with ledger.engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text("SELECT event_id FROM events ORDER BY event_id"))]
    assert ids == sorted(e.event_id for e in events)
    for e in events:
        stored = ledger.event(e.event_id)
        assert stored is not None
        want = dict(zip(COLUMNS, to_row(e, None), strict=True))
        for column in ("at", "seq", "tool", "task", "status", "last_byte_ms", "first_byte_ms", "tokens_in"):
            assert getattr(stored, column) == want[column], (e.event_id, column)
        assert stored.head == want["head"] and stored.cost_usd == 0.25


def test_sparse_indexes_hold_only_rows_with_a_value_and_serve_their_reads(ledger: Ledger) -> None:
    """Each sparse column's index is partial: its reads (`tool = ?`, `status >= 400`, ...) use it and
    find exactly the rows that have the value."""
    events = [mixed(i) for i in range(N)]
    ledger.append(batch(events))
    reads = {
        "tool": ("tool = 'tool-1'", [e for e in events if getattr(e, "tool", None) == "tool-1"]),
        "task": ("task = 't1'", [e for e in events if getattr(e, "task", None) == "t1"]),
        "status": ("status >= 200 AND status < 300", [e for e in events if getattr(e, "status", None)]),
        "last_byte_ms": (
            "last_byte_ms > 100",
            [e for e in events if (getattr(e, "last_byte_ms", 0) or 0) > 100],
        ),
    }
    with ledger.engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if not sqlite:
            conn.execute(text("SET enable_seqscan = off"))  # a 250-row table would be scanned anyway
        for column, (where, expected) in reads.items():
            found = [
                r[0]
                for r in conn.execute(text(f"SELECT event_id FROM events WHERE {where} ORDER BY event_id"))
            ]
            assert found == sorted(e.event_id for e in expected) and found
            plan = " ".join(
                str(r[-1])
                for r in conn.execute(
                    text(
                        ("EXPLAIN QUERY PLAN " if sqlite else "EXPLAIN ")
                        + f"SELECT event_id FROM events WHERE {where}"
                    )
                )
            )
            assert SPARSE_INDEXES[column] in plan, plan
            if sqlite:
                sql = conn.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = :n"), {"n": SPARSE_INDEXES[column]}
                ).scalar_one()
            else:
                sql = conn.execute(
                    text(
                        "SELECT indexdef FROM pg_indexes WHERE indexname = :n"
                        " AND schemaname = current_schema()"
                    ),
                    {"n": SPARSE_INDEXES[column]},
                ).scalar_one()
            assert "IS NOT NULL" in sql, sql


def test_the_chain_over_fast_rows_verifies_and_finds_a_forged_row(ledger: Ledger, ledger_url: str) -> None:
    """Batches written by the fast path verify clean; editing one row behind flightlog's back is
    named as forged, in the batch that inserted it."""
    for b in range(4):
        ledger.append(batch([mixed(b * 60 + i) for i in range(60)], position=b + 1))
    assert problems(ledger) == []
    Tamperer(ledger_url).run(
        "UPDATE events SET tool = 'evil' WHERE event_id = 'ev-000130'", drop=("events_no_update",)
    )
    assert problems(ledger) == ["forged: event ev-000130 (batch #3 of test): its row is not the one recorded"]


@pytest.mark.parametrize("size", [100, 6], ids=["large", "small"])
def test_a_redelivery_adds_no_row_and_no_link_and_an_overlap_only_its_new_rows(
    ledger: Ledger, size: int
) -> None:
    """The same batch twice: the second adds nothing and chains nothing; a batch half old, half new
    inserts and chains only the new half, and the chain still verifies, for a large batch and a
    small one (an old id offered straight fails the insert on the primary key; the batch is then
    run the careful way and the id counts as a duplicate)."""
    half = size // 2
    first = batch([mixed(i) for i in range(size)], position=1)
    assert ledger.append(first).new == size
    again = ledger.append(first)
    assert (again.new, again.duplicates) == (0, size)
    overlap = ledger.append(batch([mixed(i) for i in range(half, size + half)], position=2))
    assert (overlap.new, overlap.duplicates) == (half, half)
    with ledger.engine.connect() as conn:
        links = conn.execute(text("SELECT chain_index, event_ids FROM batches ORDER BY chain_index")).all()
        count = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    assert count == size + half and [r[0] for r in links] == [1, 2]
    assert links[1][1].count("ev-") == half and f"ev-{half:06d}" not in links[1][1]
    assert problems(ledger) == []


def test_only_batches_worth_the_hand_off_hash_their_leaves_on_a_thread() -> None:
    """PostgreSQL: handing a batch's leaves to the hashing thread costs more CPU than hashing a few
    rows inline, so only a batch of `HASH_APART_MIN` new rows or more is handed over (both paths
    chain and verify: the re-delivery test runs 6- and 100-event batches)."""
    assert not hash_apart(1) and not hash_apart(HASH_APART_MIN - 1)
    assert hash_apart(HASH_APART_MIN) and hash_apart(1000)


def _waiting_backends(url: str) -> int:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE 'COPY events %'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_row_committed_by_another_writer_mid_batch_goes_through_on_conflict(
    pg_url: str, tmp_path: Path
) -> None:
    """PostgreSQL: another connection inserts one of the batch's ids after the batch checked its ids
    and commits while the batch's COPY waits on it; the batch still commits, counting that event as
    a duplicate, and its link covers exactly the rows it inserted."""
    ledger = open_ledger(pg_url, (tmp_path / "blobs").as_uri())
    assert ledger.append(batch([mixed(i) for i in range(100, 105)], position=1)).new == 5  # caught up
    events = [mixed(i) for i in range(40)]
    other = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1))
    try:
        row = to_row(events[7], None)
        values = list(row)
        values[COLUMNS.index("payload_state")] = "none"
        values[COLUMNS.index("payload_text")] = None
        marks = ", ".join("%s" for _ in COLUMNS)
        other.execute(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({marks})", values)  # not committed
        done: dict[str, AppendResult] = {}
        worker = threading.Thread(target=lambda: done.update(result=ledger.append(batch(events, position=2))))
        worker.start()
        deadline = time.monotonic() + 30
        while _waiting_backends(pg_url) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting_backends(pg_url) == 1, "the batch's COPY never waited on the other writer's row"
        other.commit()
        worker.join(30)
        result = done["result"]
        assert (result.new, result.duplicates + len(result.conflicts)) == (39, 1)
        with ledger.engine.connect() as conn:
            ids = conn.execute(text("SELECT event_ids FROM batches WHERE chain_index = 2")).scalar_one()
        assert ids.count("ev-") == 39 and "ev-000007" not in ids
    finally:
        other.close()
        ledger.close()


def test_a_restarted_writers_redelivery_never_fails_an_insert_and_then_inserts_directly(
    ledger_url: str, tmp_path: Path, paths: list[bool]
) -> None:
    """A writer started again re-delivers what its predecessor had committed, often over several
    batches. Offered straight (PostgreSQL's `COPY events`, SQLite's insert without the lookup),
    each such batch would be refused by a primary key or SQLite's trigger and roll back (and on
    PostgreSQL leave an ERROR line in the server's log for the operator to chase); a fresh Ledger
    instead sends a collector's batches the careful way until one comes back wholly new, and only
    then inserts directly. No transaction of the new Ledger rolls back."""
    from sqlalchemy import event as sa_event

    blobs = (tmp_path / "blobs").as_uri()
    first = open_ledger(ledger_url, blobs)
    delivered = [batch([mixed(i) for i in range(k * 20, k * 20 + 20)], position=k + 1) for k in range(3)]
    try:
        for b in delivered:
            assert first.append(b).new == 20
    finally:
        first.close()

    paths.clear()
    again = open_ledger(ledger_url, blobs)
    rollbacks: list[object] = []
    sa_event.listen(again.engine, "rollback", lambda conn: rollbacks.append(conn))
    try:
        assert [again.append(b).duplicates for b in delivered[1:]] == [20, 20]
        overlap = again.append(batch([mixed(i) for i in range(50, 90)], position=4))
        assert (overlap.new, overlap.duplicates) == (30, 10)
        after = [again.append(batch([mixed(i) for i in range(k, k + 5)], position=k)).new for k in (90, 95)]
        assert after == [5, 5]
        assert rollbacks == [], "a re-delivered batch failed its insert and rolled back"
        assert paths == [True, True, True, True, False], "careful until a batch is wholly new, then direct"
        assert problems(again) == []
    finally:
        again.close()


@pytest.mark.parametrize("size", [6, 100])
def test_a_caught_up_collectors_batch_with_a_stored_id_is_run_again_the_careful_way(
    ledger: Ledger, size: int, paths: list[bool]
) -> None:
    """Once a collector is caught up its batches go straight in; one that carries a stored id
    anyway (another writer of the same collector, an operator's import) is refused there, by
    SQLite's trigger (a small batch) or a primary key, and at once run again the careful way: it
    commits with the stored event counted as a duplicate, and the chain covers only the new rows."""
    assert ledger.append(batch([mixed(i) for i in range(1000, 1005)], position=1)).new == 5  # caught up
    paths.clear()
    result = ledger.append(batch([mixed(i) for i in range(1003, 1003 + size)], position=2))
    assert (result.new, result.duplicates) == (size - 2, 2)
    assert paths == [False, True], "direct first, refused, then the careful way"
    assert ledger.append(batch([mixed(i) for i in range(2000, 2003)], position=3)).new == 3
    assert paths == [False, True, True], "after a batch that was not wholly new, careful again"
    with ledger.engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    assert count == 5 + size - 2 + 3
    assert problems(ledger) == []


def test_a_repeated_payload_is_stored_once_and_read_back_for_every_event(ledger: Ledger) -> None:
    """Each batch asks the database which of its payloads are stored: a payload repeated across
    batches is stored once, a new one beside it is stored, and every event reads its own bytes."""
    same = b'{"tools": ["the same list every time"]}'
    ledger.append(batch([event(0, payload=same)], position=1))
    ledger.append(batch([event(1, payload=same), event(2, payload=same)], position=2))
    ledger.append(batch([event(3, payload=same), event(4, payload=b"new")], position=3))
    stored = list(ledger.events([f"ev-{i:06d}" for i in range(5)]))
    assert [ledger.payload(e.payload_sha256 or "") for e in stored] == [same] * 4 + [b"new"]
    with ledger.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM blobs")).scalar_one() == 2


def test_a_blob_gone_behind_the_ledgers_back_is_stored_anew_by_the_next_batch(
    ledger_url: str, tmp_path: Path
) -> None:
    """If a blob disappears behind a Ledger's back (a database restored from an older copy, a row
    deleted past the triggers), the next batch that refers to it finds it absent and stores it
    anew: nothing kept in the process says it is still there."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri(), retry_seconds=1)
    try:
        same = b'{"system": "the same prompt"}'
        ledger.append(batch([event(0, payload=same)], position=1))
        Tamperer(ledger_url).run("DELETE FROM blobs", drop=("blobs_no_delete",))
        assert ledger.append(batch([event(1, payload=same)], position=2)).new == 1
        (stored,) = ledger.events(["ev-000001"])
        assert ledger.payload(stored.payload_sha256 or "") == same
    finally:
        ledger.close()


def test_a_leaf_is_the_same_whatever_form_the_writer_holds_its_time_and_bytes_in() -> None:
    """The chain leaf of a row is that of its canonical values: an aware UTC time, the same time
    in another zone, or SQLite's text of it; bytes, a bytearray or a memoryview of them; and it is
    what `stored_leaf` derives from the row as either engine gives it back."""
    from datetime import UTC, datetime, timedelta, timezone

    from storage.chain import links as chain

    row = to_row(event(3, b"body"), ("a" * 64, 4, True))
    at, head = COLUMNS.index("at"), COLUMNS.index("head")
    utc_time: datetime = row[at]
    assert utc_time.tzinfo is UTC

    def with_(time: Any, data: Any) -> tuple[Any, ...]:
        return (*row[:at], time, *row[at + 1 : head], data, *row[head + 1 :])

    forms = [
        with_(utc_time, row[head]),
        with_(utc_time.astimezone(timezone(timedelta(hours=5, minutes=30))), bytearray(row[head])),
        with_(utc_time.isoformat(" ", "microseconds")[:26], memoryview(row[head])),
    ]
    leaves = chain.written_leaves(forms)
    assert len(set(leaves)) == 1
    assert leaves[0] == chain.stored_leaf(row, COLUMNS)
    with pytest.raises(TypeError, match="no canonical form for set"):
        chain.written_leaves([with_(utc_time, {1})])


def _commit_frames(path: Path, hour_index: bool) -> int:
    """WAL frames (pages) that one 100-event commit writes into a 5,000-event SQLite Ledger whose
    events all fall in one hour with scattered token counts, with or without `ix_events_hour`."""
    rng = random.Random(14)
    ledger = open_ledger(f"sqlite:///{path}", (path.parent / f"{path.stem}-blobs").as_uri())
    try:
        if not hour_index:
            with ledger.engine.begin() as conn:
                conn.exec_driver_sql("DROP INDEX ix_events_hour")
        events = [event(i, payload=None, tokens_in=rng.randint(1, 100_000)) for i in range(5_100)]
        for b in range(5):
            ledger.append(batch(events[b * 1000 : (b + 1) * 1000], position=b + 1))
        with ledger.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        ledger.append(batch(events[5000:], position=6))
        with ledger.engine.connect() as conn:
            busy, frames, _ = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
        assert busy == 0
        return int(frames)
    finally:
        ledger.close()


def test_sqlite_hour_index_takes_an_hours_events_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the current hour the hour index is in time order (migration 0007): a commit adds its
    events at the index's last pages, not one page each by token count (a 100-event commit writes 6
    of its pages, against 35 in the old order), and counting by hour (the one SUMS text, `unpriced`
    included) still reads the index alone. The checkpoint thread is kept from firing: the frames are
    counted by this test's own checkpoint, which a background one running at the same moment would
    find busy (seen on a loaded machine)."""
    monkeypatch.setattr("storage.wal_checkpoints.PAGES", 10**9)
    with_index = _commit_frames(tmp_path / "with.db", hour_index=True)
    without = _commit_frames(tmp_path / "without.db", hour_index=False)
    assert 0 < with_index - without <= 8, (with_index, without)
    ledger = open_ledger(f"sqlite:///{tmp_path / 'with.db'}", (tmp_path / "with-blobs").as_uri())
    try:
        with ledger.engine.connect() as conn:
            plan = " ".join(
                str(r[-1])
                for r in conn.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN SELECT {event_sql.group_key('sqlite', 'hour')}, {event_sql.SUMS}"
                    " FROM events GROUP BY 1"
                )
            )
    finally:
        ledger.close()
    assert "USING COVERING INDEX ix_events_hour" in plan, plan


def test_a_forked_child_chains_its_own_batches(pg_url: str, tmp_path: Path) -> None:
    """A process that appended to PostgreSQL (so its leaf-hashing thread runs) forks; the child's own
    Ledger appends and chains its batch. A thread is not copied by a fork: leaves queued for the
    parent's would never be hashed, and the child's append would wait forever."""
    blobs = (tmp_path / "blobs").as_uri()
    parent = open_ledger(pg_url, blobs)
    parent.append(batch([mixed(i) for i in range(40)], position=1))
    parent.close()
    with warnings.catch_warnings():  # the parent has threads (this one is the point of the test)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            child = open_ledger(pg_url, blobs)
            code = 0 if child.append(batch([mixed(i) for i in range(40, 80)], 1, "child")).new == 40 else 2
            child.close()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's append did not finish in 30 s")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    ledger = open_ledger(pg_url, blobs)
    try:
        with ledger.engine.connect() as conn:
            chained = conn.execute(text("SELECT collector, chain_index FROM batches ORDER BY 1")).all()
        assert [tuple(r) for r in chained] == [("child", 1), ("test", 1)]
        assert problems(ledger) == []
    finally:
        ledger.close()
