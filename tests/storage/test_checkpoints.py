"""SQLite: the writer's commits leave the WAL's copy back into the database file to a thread of its
own (`storage.wal_checkpoints`), and an in-line backstop keeps the WAL bounded under any load."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from storage import wal_checkpoints as checkpoints
from storage.events import Batch
from storage.ledger import open_ledger
from tests.storage.factory import batch, event

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.com\r\n" + b"x-pad: " + b"p" * 300


def batches(count: int, size: int = 200) -> list[Batch]:
    """`count` batches of `size` payload-less events with heads long enough to fill WAL pages."""
    return [
        batch([event(k * size + i, None, head=HEAD) for i in range(size)], position=k + 1)
        for k in range(count)
    ]


def events_in_main_file(db: Path, tmp_path: Path) -> int:
    """Events the database file alone holds: what checkpoints copied there, without the WAL."""
    copy = tmp_path / f"main-{time.monotonic_ns()}.db"
    shutil.copyfile(db, copy)
    with closing(sqlite3.connect(copy)) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchall():
            return 0  # not even the schema has been copied back yet
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


@pytest.fixture
def checkpoint_threads() -> Callable[[], list[threading.Thread]]:
    """The checkpoint threads alive now that were not when the test began (other tests' Ledgers,
    left open in this worker, may still have theirs)."""
    before = set(threading.enumerate())

    def alive() -> list[threading.Thread]:
        return [
            t
            for t in threading.enumerate()
            if t.name == "flightlog-checkpoint" and t.is_alive() and t not in before
        ]

    return alive


def test_commits_leave_the_checkpoint_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint_threads: Callable[[], list[threading.Thread]]
) -> None:
    """Commits that fill the WAL well past SQLite's default 1,000 pages copy nothing back into the
    database file themselves (no commit pays for a checkpoint); the checkpointer's thread does,
    `GAP` after them, and it is gone once the Ledger is closed."""
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(checkpoints, "GAP", 3600.0)  # the thread never gets to it in this part
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    try:
        for b in batches(12):
            ledger.append(b)
        wal_pages = (db.parent / "ledger.db-wal").stat().st_size // 4096
        assert wal_pages > 1000, "the batches did not fill the WAL past the default checkpoint"
        assert events_in_main_file(db, tmp_path) == 0, "a commit checkpointed in-line"
    finally:
        ledger.close()
    assert checkpoint_threads() == []

    monkeypatch.setattr(checkpoints, "GAP", 0.05)
    second = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    try:
        for b in batches(20)[12:]:  # enough frames by `frames`' estimate for a checkpoint to be due
            second.append(b)
        deadline = time.monotonic() + 10
        while events_in_main_file(db, tmp_path) < 20 * 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert events_in_main_file(db, tmp_path) == 20 * 200, "the checkpointer never copied the WAL back"
        assert len(checkpoint_threads()) == 1
    finally:
        second.close()
    assert checkpoint_threads() == []


def test_the_backstop_keeps_the_wal_bounded_when_the_thread_gets_no_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the checkpointer held off (commits back to back leave it no quiet moment), the writer's
    own in-line checkpoint at `BACKSTOP_PAGES` still copies the WAL back and lets it start over:
    the WAL file stays near the backstop plus one commit however much is written."""
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(checkpoints, "GAP", 3600.0)
    monkeypatch.setattr(checkpoints, "BACKSTOP_PAGES", 300)
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    try:
        written = 0
        largest = 0
        for b in batches(20):
            before = db.with_name("ledger.db-wal").stat().st_size if written else 0
            ledger.append(b)
            after = db.with_name("ledger.db-wal").stat().st_size
            largest = max(largest, after - before)
            written += len(b.events)
        wal_pages = db.with_name("ledger.db-wal").stat().st_size // 4096
        assert wal_pages <= 300 + 2 * largest // 4096, f"the WAL grew to {wal_pages} pages"
        assert events_in_main_file(db, tmp_path) > written // 2, "no in-line checkpoint ran"
    finally:
        ledger.close()


def test_an_idle_checkpointer_ends_its_thread_and_the_next_commit_starts_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint_threads: Callable[[], list[threading.Thread]]
) -> None:
    """A Ledger left open with no commits keeps no checkpoint thread past `IDLE` (one dropped
    without `close` leaks none for long), and its next commit starts one that checkpoints again."""
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(checkpoints, "GAP", 0.02)
    monkeypatch.setattr(checkpoints, "IDLE", 0.3)
    monkeypatch.setattr(checkpoints, "PAGES", 1)  # every commit makes one due
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    try:
        work = batches(2)
        ledger.append(work[0])
        assert len(checkpoint_threads()) == 1
        deadline = time.monotonic() + 10
        while checkpoint_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checkpoint_threads() == [], "the thread outlived its idleness"
        assert events_in_main_file(db, tmp_path) == 200
        ledger.append(work[1])
        assert len(checkpoint_threads()) == 1
        while events_in_main_file(db, tmp_path) < 400 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert events_in_main_file(db, tmp_path) == 400, "the restarted thread never checkpointed"
    finally:
        ledger.close()
    assert checkpoint_threads() == []


def test_an_agent_paced_writer_checkpoints_at_sqlites_cadence_not_after_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint_threads: Callable[[], list[threading.Thread]]
) -> None:
    """A few small commits (an agent's pace) make no checkpoint due: each would cost the writer its
    wake-up, copy and syncs for a handful of pages (bench.trickle: +44% of the writer's CPU at 5
    requests a second). Once about `PAGES` frames were written, one is, and it runs."""
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(checkpoints, "GAP", 0.02)
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    try:
        small = batches(60, size=2)
        for b in small[:10]:
            ledger.append(b)
        time.sleep(0.3)
        assert checkpoint_threads() == [] and events_in_main_file(db, tmp_path) == 0
        assert checkpoints.frames(2) * 10 < checkpoints.PAGES <= checkpoints.frames(2) * 60
        for b in small[10:]:
            ledger.append(b)
        deadline = time.monotonic() + 10
        while events_in_main_file(db, tmp_path) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert events_in_main_file(db, tmp_path) >= 100, "no checkpoint ran once enough was written"
    finally:
        ledger.close()


def test_the_frame_estimate_stays_near_what_sqlite_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate that sets the cadence is within a factor of two of the WAL frames SQLite reports
    for commits of 2, 20, 120 and 600 events into a Ledger that already holds some."""
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(checkpoints, "PAGES", 10**9)  # this test's own checkpoints alone
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    position = 0
    try:
        for rows in (600, 2, 20, 120, 600):
            with closing(sqlite3.connect(db)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                for _ in range(5):
                    position += 1
                    first = position * 1000
                    ledger.append(batch([event(first + i, None, head=HEAD) for i in range(rows)], position))
                written = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1] / 5
            assert 0.5 <= checkpoints.frames(rows) / written <= 2.0, (rows, written)
    finally:
        ledger.close()
