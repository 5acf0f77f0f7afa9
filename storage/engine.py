"""SQLAlchemy engines for the two supported databases, configured for the Ledger's needs.

SQLite (the embedded default): WAL, foreign keys, `recursive_triggers` (so `INSERT OR REPLACE`
fires the delete trigger and is refused), a busy timeout, and `BEGIN IMMEDIATE` for writes so two
writers queue instead of failing half-way. PostgreSQL: psycopg 3, a connection idle for a while
pinged before it is handed out (`ping_when_idle`), so a restarted server costs one reconnect, not an
error.

The write lock and the pragmas are `storage.sqlite_setup`'s (the standard library alone).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError

from storage.errors import BadLedgerUrl
from storage.locations import private_file
from storage.sqlite_setup import begin_immediate, configure

WRITE = {"flightlog_write": True}
"""Execution options for a connection that will write: SQLite takes its write lock up front."""


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
        configure(dbapi_conn)  # the driver stays out; BEGIN is ours (below)

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

    SQLAlchemy's `pool_pre_ping` pings at every checkout: a round trip a commit, in the writer's CPU
    and wall time, for a connection used one flush interval before. A
    server that went away within the last second is met by the first statement instead: it
    invalidates the connection (SQLAlchemy for its own statements, `storage.chain.links.query` for the
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
