"""A SQLite connection as flightlog holds one: its pragmas, and how a writer takes the write lock.

The standard library alone, so a SQLAlchemy engine (`storage.engine`) and the Directory's stdlib
path (`storage.documents.reads`, `storage.documents.writes`) hold their connections alike without
the latter importing SQLAlchemy.

The write lock is not waited for with SQLite's busy timeout: its handler sleeps in growing steps
that reach a tenth of a second, so a writer woke up long after the lock was free: with one writer
per proxy worker, each writer's commits queued behind the other's that way (bench.workers, issue
14). `begin_immediate` asks again after a short, growing delay instead (`next_delay`), up to
`LOCK_WAIT`, and then gives SQLite's own SQLITE_BUSY error (the Ledger's `LedgerBusy`: an outage,
retried). Behind a long holder (an import, a prune) it asks less often as the wait goes on, at most
4% late, so a wait costs little CPU.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

LOCK_WAIT = 30.0
"""Seconds a SQLite writer asks for the write lock before SQLITE_BUSY is the answer (read when asked)."""
BUSY_TIMEOUT_MS: Final = 30_000
"""SQLite's own busy timeout, for everything but taking the write lock (a reader in WAL mode
rarely meets a lock: only while a connection recovers the WAL index)."""
CACHE_KIB: Final = 2 * 1024
"""SQLite's page cache per connection: about its default, said here so a change is measured
against it. It was far larger while events arrived with random ids (mitmproxy's UUID4 flow ids),
each insert landing on a random page of the id indexes. With the proxy's time-ordered ids
(recording.action_ids) a batch touches the last pages of each index, and the larger cache no
longer paid (bench.writer, bench.ledger, bench.browse: unchanged within their noise); what it cost
was memory, the writer process growing by the whole cache under load (bench.capture's RSS)."""
POLL_FIRST: Final = 0.0002
POLL_MAX: Final = 0.002
POLL_SHARE: Final = 0.04
"""Once a wait has lasted `POLL_MAX / POLL_SHARE`, the next try comes this share of the time
already waited later, so a wait ends at most 4% late. Asking every `POLL_MAX` the whole time cost
CPU behind a holder that kept the lock for seconds; growing the delay with the wait keeps a long
wait's CPU to a fraction of that (`tests/storage/test_sqlite_lock.py`)."""
POLL_LONG: Final = 0.025
"""The longest wait between two tries."""
_SQLITE_BUSY: Final = 5


def next_delay(delay: float, waited: float) -> float:
    """The sleep before the next try for the write lock: doubling from `POLL_FIRST` to `POLL_MAX`,
    then `POLL_SHARE` of the time already `waited`, up to `POLL_LONG`."""
    return min(max(min(delay * 2, POLL_MAX), waited * POLL_SHARE), POLL_LONG)


def begin_immediate(dbapi_conn: Any) -> None:
    """`BEGIN IMMEDIATE` on a raw sqlite3 connection, asking again after `next_delay` while another
    connection holds the write lock (SQLITE_BUSY, known by its result code), for up to `LOCK_WAIT`
    seconds; then that SQLITE_BUSY error is raised. The busy timeout is off for these attempts only."""
    dbapi_conn.execute("PRAGMA busy_timeout = 0")
    try:
        first = 0.0
        delay = POLL_FIRST
        while True:
            try:
                dbapi_conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as e:
                if (e.sqlite_errorcode or 0) & 0xFF != _SQLITE_BUSY:
                    raise
                now = time.monotonic()
                first = first or now
                if now >= first + LOCK_WAIT:
                    raise
            time.sleep(delay)
            delay = next_delay(delay, time.monotonic() - first)
    finally:
        dbapi_conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


PRAGMAS: Final = (
    "journal_mode = WAL",
    "synchronous = NORMAL",
    "foreign_keys = ON",
    "recursive_triggers = ON",
    f"busy_timeout = {BUSY_TIMEOUT_MS}",
    f"cache_size = -{CACHE_KIB}",
)
"""WAL, foreign keys, `recursive_triggers` (so `INSERT OR REPLACE` fires the delete trigger and is
refused), the busy timeout, the page cache."""


def configure(dbapi_conn: Any) -> None:
    """Set `PRAGMAS` on a new connection and keep the driver out of transactions: BEGIN is ours."""
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    for pragma in PRAGMAS:
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def sqlite_time(at: datetime) -> str:
    """SQLAlchemy's own SQLite datetime text, `YYYY-MM-DD HH:MM:SS.ffffff`, of `at` in UTC (a naive
    `at` is taken as UTC), so ORM and raw reads agree; also the chain's canonical time."""
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at.isoformat(" ", "microseconds")


def open_file(path: Path | str) -> sqlite3.Connection:
    """A stdlib connection to an existing SQLite file, shareable by threads, the driver kept out of
    transactions. `mode=rw`: a file that is not there (a Ledger removed meanwhile) is an error, never
    an empty database made in its place."""
    return sqlite3.connect(
        f"{Path(path).resolve().as_uri()}?mode=rw",
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
        check_same_thread=False,
    )


class LentConnection:
    """One configured stdlib connection to a SQLite file, opened on first use and lent for one
    transaction at a time (threads that share it queue)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def lend(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                conn = open_file(self.path)
                try:
                    configure(conn)
                except sqlite3.Error:
                    conn.close()
                    raise
                self._conn = conn
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
