"""Request rates: at most N calls per sliding window, per agent (session, task), for the whole home.

Every process that applies a FLIGHTLOG_HOME's policy (each `--workers` worker of the proxy,
`flightlog mcp-record`) counts in one small SQLite file there (`rates.db`): a rate is a promise
about the caller, and a caller whose connections the kernel spreads over N workers must not get N
times it. A window is the times of the calls it let through (wall-clock seconds, comparable across
processes); each check, in one write transaction, drops the rate's calls that aged out, counts the
caller's, and adds this one if there is room. A refused call is not counted.

The file is a counter, not a record (the Ledger records the calls and the refusals): it is made
when a policy with a rate is first applied and may be deleted while nothing runs. If it cannot be
opened (a read-only home), the process counts alone in memory and says so in one line: a rate then
holds per process, as before there was a file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from egress.limits import Rate, key_of
from egress.rules import Call, Decision

log = logging.getLogger("flightlog.egress")

FILE: Final = "rates.db"
BUSY_MS: Final = 2000
"""How long a check waits for another process's check to finish (theirs take well under a millisecond)."""
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS calls (rate TEXT NOT NULL, who TEXT, at REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS calls_rate_at ON calls (rate, at);"
    "CREATE INDEX IF NOT EXISTS calls_rate_who ON calls (rate, who, at);"
)


class RateBook:
    """The recent calls of each (rate, caller), shared through `path` (None: this process only)."""

    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def take(self, rate: Rate, call: Call) -> Decision | None:
        """Count `call` if the window has room; else a refusal naming the rate (nothing counted)."""
        who = key_of(call, rate.per)
        now = self.clock()
        horizon = now - rate.window.total_seconds()
        with self._lock:
            db = self._connection()
            with db:  # BEGIN IMMEDIATE ... COMMIT: one check at a time across the processes
                db.execute("DELETE FROM calls WHERE rate = ? AND at <= ?", (rate.name, horizon))
                count, oldest = db.execute(
                    "SELECT count(*), min(at) FROM calls WHERE rate = ? AND who IS ?", (rate.name, who)
                ).fetchone()
                if count < rate.requests:
                    db.execute("INSERT INTO calls (rate, who, at) VALUES (?, ?, ?)", (rate.name, who, now))
                    return None
        return Decision(
            "deny",
            rate.name,
            f"{rate.describe(who)}: {count} in the last {rate.window.total_seconds():g} s",
            details={"retry_after_s": round(max(0.0, oldest - horizon), 3)},
        )

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = _open(self.path)
        return self._db


def _open(path: Path | None) -> sqlite3.Connection:
    """The shared file (made on first use), or an in-memory one when there is none or it cannot be used."""
    if path is not None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            db = sqlite3.connect(
                path, timeout=BUSY_MS / 1000, isolation_level="IMMEDIATE", check_same_thread=False
            )
            return _setup(db, True)
        except (OSError, sqlite3.Error) as e:
            log.warning("rates are counted in this process alone: cannot use %s (%s)", path, e)
    return _setup(sqlite3.connect(":memory:", isolation_level="IMMEDIATE", check_same_thread=False), False)


def _setup(db: sqlite3.Connection, shared: bool) -> sqlite3.Connection:
    if shared:  # several writers, short transactions; losing the last counts in a crash costs nothing
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
    db.executescript(_SCHEMA)
    return db
