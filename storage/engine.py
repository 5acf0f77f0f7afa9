"""SQLAlchemy engines for the two supported databases, configured for the Ledger's needs.

SQLite (the embedded default): WAL, foreign keys, `recursive_triggers` (so `INSERT OR REPLACE`
fires the delete trigger and is refused), a busy timeout, and `BEGIN IMMEDIATE` for writes so two
writers queue instead of failing half-way. PostgreSQL: psycopg 3 with pre-ping so a restarted
server costs one reconnect, not an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError

from storage.errors import BadLedgerUrl
from storage.locations import private_file

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
        dbapi_conn.isolation_level = None  # the driver stays out; BEGIN is ours (below)
        cur = dbapi_conn.cursor()
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            "foreign_keys = ON",
            "recursive_triggers = ON",
            "busy_timeout = 30000",
        ):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("flightlog_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_engine(url: str) -> Engine:
    """An engine for a Ledger URL; one clear error for a URL flightlog cannot use."""
    url = normalize_url(url)
    try:
        if url.startswith("sqlite"):
            return _sqlite_engine(url)
        if url.startswith("postgresql+psycopg"):
            return create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=4)
        raise BadLedgerUrl(f"ledger URL {url!r}: use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")
    except ArgumentError as e:
        raise BadLedgerUrl(f"ledger URL {url!r} is not a database URL: {e}") from e
