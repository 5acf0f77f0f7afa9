"""Library errors become the Ledger's by type and result code, never by message text, and an error
the table does not know is raised as it is (never reported as "unavailable")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from storage.errors import (
    AppendOnlyViolation,
    DiskFull,
    LedgerBusy,
    LedgerUnavailable,
    RecordRefused,
    from_library,
)
from storage.ledger import open_ledger
from tests.storage.factory import batch, event


def _sqlite_error(tmp_path: Path, statement: str, setup: str = "") -> sqlite3.Error:
    conn = sqlite3.connect(tmp_path / "x.db", timeout=0)
    if setup:
        conn.executescript(setup)
    try:
        conn.execute(statement)
    except sqlite3.Error as e:
        return e
    finally:
        conn.close()
    raise AssertionError(f"{statement} did not fail")


def test_sqlite_result_codes_are_mapped(tmp_path: Path) -> None:
    """A lock held elsewhere is busy (retry), the append-only trigger a violation, a CHECK a refused
    record, an unopenable file unreachable: each from the driver's result code."""
    holder = sqlite3.connect(tmp_path / "x.db")
    holder.execute("CREATE TABLE t (a INTEGER CHECK (a > 0))")
    holder.commit()
    holder.execute("BEGIN IMMEDIATE")
    assert isinstance(from_library(_sqlite_error(tmp_path, "INSERT INTO t VALUES (1)"), "u"), LedgerBusy)
    holder.rollback()
    holder.close()
    trigger = (
        "CREATE TRIGGER no_del BEFORE DELETE ON t BEGIN SELECT RAISE(ABORT, 'no'); END;"
        " INSERT INTO t VALUES (1);"
    )
    found = from_library(_sqlite_error(tmp_path, "DELETE FROM t", trigger), "u")
    assert isinstance(found, AppendOnlyViolation)
    assert isinstance(from_library(_sqlite_error(tmp_path, "INSERT INTO t VALUES (0)"), "u"), RecordRefused)
    try:
        sqlite3.connect(tmp_path / "no" / "such" / "x.db")
    except sqlite3.Error as e:
        assert isinstance(from_library(e, "u"), LedgerUnavailable)
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # type: ignore[attr-defined]  # SQLITE_FULL, as the driver sets it
    assert isinstance(from_library(full, "u"), DiskFull)
    worded = sqlite3.OperationalError("disk is full")  # the words alone, without the code, mean nothing
    assert not isinstance(from_library(worded, "u"), DiskFull)


def test_postgres_sqlstates_are_mapped(pg_url: str, tmp_path: Path) -> None:
    """A lock wait that times out is busy; a refused connection unreachable; a data exception (class
    22, here a division by zero) a refused record."""
    dsn = pg_url.replace("postgresql+psycopg://", "postgresql://").split("?")[0]
    with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
        a.execute("CREATE TABLE IF NOT EXISTS flightlog_lock_probe (a int)")
        a.execute("BEGIN")
        a.execute("LOCK TABLE flightlog_lock_probe IN ACCESS EXCLUSIVE MODE")
        b.execute("SET lock_timeout = '50ms'")
        with pytest.raises(psycopg.Error) as info:
            b.execute("SELECT * FROM flightlog_lock_probe")
        assert isinstance(from_library(info.value, "u"), LedgerBusy)
        a.execute("ROLLBACK")
        with pytest.raises(psycopg.Error) as info:
            b.execute("SELECT 1/0")
        assert isinstance(from_library(info.value, "u"), RecordRefused)
        a.execute("DROP TABLE flightlog_lock_probe")
    with pytest.raises(psycopg.Error) as info:
        psycopg.connect("postgresql://127.0.0.1:1/none", connect_timeout=2)
    assert isinstance(from_library(info.value, "u"), LedgerUnavailable)


def test_an_unknown_error_is_raised_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure no table knows (here a bug: a TypeError inside the write) comes out of `append` as
    itself, not as LedgerUnavailable, and is not retried."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "b").as_uri(), retry_seconds=5)
    calls = []

    def broken(*args: object, **kwargs: object) -> None:
        calls.append(1)
        raise TypeError("a bug")

    monkeypatch.setattr("storage.ledger.write_batch", broken)
    with pytest.raises(TypeError, match="a bug"):
        ledger.append(batch([event(0)]))
    assert calls == [1]
    assert from_library(TypeError("x"), "u") is None
    ledger.close()
