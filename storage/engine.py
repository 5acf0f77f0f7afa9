"""SQLAlchemy engines for the two supported databases, configured for the Ledger's needs.

SQLite (the embedded default): WAL, foreign keys, `recursive_triggers` (so `INSERT OR REPLACE`
fires the delete trigger and is refused), a busy timeout, and `BEGIN IMMEDIATE` for writes so two
writers queue instead of failing half-way. PostgreSQL: psycopg 3, a connection idle for a while
pinged before it is handed out (`ping_when_idle`), so a restarted server costs one reconnect, not an
error.

The write lock is not waited for with SQLite's busy timeout: its handler sleeps in growing steps
(1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then 100 ms), so a writer that found the lock taken for
60 ms woke up to 25 ms after it was free, and after 230 ms up to 100 ms late: with one writer per
proxy worker, each writer's commits queued behind the other's that way (bench.workers, issue 14).
`begin_immediate` asks again every 0.2-2 ms instead, up to `LOCK_WAIT`, and then gives SQLite's own
SQLITE_BUSY error (the Ledger's `LedgerBusy`: an outage, retried). Behind a long holder (an import,
a prune) it asks less often as the wait goes on, at most 4% late, so a wait costs little CPU.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError

from storage.errors import BadLedgerUrl
from storage.locations import private_file

WRITE = {"flightlog_write": True}
"""Execution options for a connection that will write: SQLite takes its write lock up front."""

LOCK_WAIT = 30.0
"""Seconds a SQLite writer asks for the write lock before SQLITE_BUSY is the answer (read when asked)."""
BUSY_TIMEOUT_MS: Final = 30_000
"""SQLite's own busy timeout, for everything but taking the write lock (a reader in WAL mode
rarely meets a lock: only while a connection recovers the WAL index)."""
CACHE_KIB: Final = 32 * 1024
"""SQLite's page cache per connection (a bound, filled only as pages are read; SQLite's default is
2 MiB). Events arrive with random ids (flow UUIDs), so every insert lands on a random page of the
primary key and `action_id` indexes: once those outgrow the cache each row read them back from the
OS (measured with 70-row batches of random ids: ~48 -> ~38 us of CPU a row)."""
POLL_FIRST: Final = 0.0002
POLL_MAX: Final = 0.002
POLL_SHARE: Final = 0.04
"""Once a wait has lasted `POLL_MAX / POLL_SHARE` (50 ms), the next try comes this share of the
time already waited later, so a wait ends at most 4% late. Asking every 2 ms the whole time cost
~30 ms of CPU a second behind a holder that kept the lock for seconds; past 0.6 s this asks 40
times a second (~4 ms), and a whole 2 s wait costs 19-21 ms of CPU where it cost 55-69
(`tests/storage/test_sqlite_lock.py`, measured on the 2-core bench machine)."""
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


def normalize_url(url: str) -> str:
    """Accept `postgres://` and `postgresql://` as psycopg 3 URLs; plain paths as SQLite files."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    return url


def _sqlite_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        private_file(Path(parsed.database).expanduser())  # 0600: the Ledger is the operator's
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver stays out; BEGIN is ours (below)
        cur = dbapi_conn.cursor()
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            "foreign_keys = ON",
            "recursive_triggers = ON",
            f"busy_timeout = {BUSY_TIMEOUT_MS}",
            f"cache_size = -{CACHE_KIB}",
        ):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        if conn.get_execution_options().get("flightlog_write"):
            begin_immediate(conn.connection.driver_connection)
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


PING_IDLE: Final = 1.0
"""Seconds a pooled PostgreSQL connection may have been idle and still be handed out unpinged."""


def ping_when_idle(engine: Engine, idle: float = PING_IDLE) -> None:
    """Ping a PostgreSQL connection at checkout only when it has been idle `idle` seconds or more.

    SQLAlchemy's `pool_pre_ping` pings at every checkout: a round trip a commit, ~83 us of the
    writer's CPU and ~160 us of wall time on this machine, for a connection used 50 ms before. A
    server that went away within the last second is met by the first statement instead: it
    invalidates the connection (SQLAlchemy for its own statements, `storage.chain.query` for the
    writer's) and the Ledger retries the batch (it is idempotent), as it already must for a server
    lost mid-transaction. A failed ping raises `DisconnectionError`, on which the pool connects
    afresh (SQLAlchemy's documented pessimistic recipe)."""

    def _used(_dbapi_conn: Any, record: Any) -> None:
        record.info["flightlog_used"] = time.monotonic()

    event.listen(engine, "connect", _used)  # a new connection was just used to connect
    event.listen(engine, "checkin", _used)

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("flightlog_used", 0.0) < idle:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
        except engine.dialect.loaded_dbapi.Error as e:
            if engine.dialect.is_disconnect(e, dbapi_conn, None):
                raise DisconnectionError(str(e)) from e
            raise


def make_engine(url: str) -> Engine:
    """An engine for a Ledger URL; one clear error for a URL flightlog cannot use."""
    url = normalize_url(url)
    try:
        if url.startswith("sqlite"):
            return _sqlite_engine(url)
        if url.startswith("postgresql+psycopg"):
            engine = create_engine(url, pool_size=4, max_overflow=4)
            ping_when_idle(engine)
            return engine
        raise BadLedgerUrl(f"ledger URL {url!r}: use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")
    except ArgumentError as e:
        raise BadLedgerUrl(f"ledger URL {url!r} is not a database URL: {e}") from e
