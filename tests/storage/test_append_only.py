"""The database itself refuses to change or remove a recorded event, on both engines."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from storage.ledger import Ledger, open_ledger
from tests.storage.factory import batch, event
from tests.storage.tamper import sqlite3_cli


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    opened.append(batch([event(0), event(1)]))
    yield opened
    opened.close()


def refused(ledger: Ledger, sql: str) -> str:
    with pytest.raises(DBAPIError) as info, ledger.engine.begin() as conn:
        conn.execute(text(sql))
    return str(info.value)


def still_there(ledger: Ledger) -> None:
    with ledger.engine.connect() as conn:
        rows = conn.execute(text("SELECT event_id, status FROM events ORDER BY event_id")).all()
    assert [tuple(r) for r in rows] == [("ev-000000", None), ("ev-000001", 200)]


def test_update_is_refused(ledger: Ledger) -> None:
    """UPDATE of an event fails with the append-only message and changes nothing."""
    assert "append-only" in refused(ledger, "UPDATE events SET status = 500")
    still_there(ledger)


def test_delete_is_refused(ledger: Ledger) -> None:
    """DELETE, with or without a WHERE clause, is refused."""
    assert "append-only" in refused(ledger, "DELETE FROM events WHERE event_id = 'ev-000000'")
    assert "append-only" in refused(ledger, "DELETE FROM events")
    still_there(ledger)


def test_truncate_is_refused(ledger: Ledger) -> None:
    """TRUNCATE (PostgreSQL) is refused by a statement trigger; SQLite has no TRUNCATE."""
    if ledger.engine.dialect.name != "postgresql":
        assert "append-only" in refused(ledger, "DELETE FROM events")  # SQLite's truncate path
    else:
        assert "append-only" in refused(ledger, "TRUNCATE events CASCADE")
    still_there(ledger)


def test_on_conflict_do_update_is_refused(ledger: Ledger) -> None:
    """An upsert that would overwrite a recorded event fires the update trigger and fails."""
    sql = (
        "INSERT INTO events (event_id, action_id, collector, seq, at, kind, direction, head,"
        " payload_state, redacted) SELECT event_id, action_id, collector, seq, at, kind,"
        " direction, head, 'none', redacted FROM events WHERE event_id = 'ev-000000'"
        " ON CONFLICT (event_id) DO UPDATE SET status = 599"
    )
    assert "append-only" in refused(ledger, sql)
    still_there(ledger)


REPLACE_EVENT = (
    "INSERT OR REPLACE INTO events (event_id, action_id, collector, seq, at, kind, direction, head,"
    " payload_state, redacted) VALUES ('ev-000000', 'a', 'c', 0, '2026-01-01', 'k',"
    " 'in', x'00', 'none', '[]')"
)


def test_the_sqlite3_cli_cannot_replace_an_event(tmp_path: Path) -> None:
    """The `sqlite3` CLI (its own connection, no flightlog pragma) gets the append-only refusal for
    INSERT OR REPLACE, REPLACE and INSERT OR IGNORE of a recorded id, and the row stays."""
    db = tmp_path / "l.db"
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    ledger.append(batch([event(0), event(1)]))
    for sql in (REPLACE_EVENT, REPLACE_EVENT.replace("INSERT OR REPLACE", "REPLACE")):
        done = sqlite3_cli(db, sql)
        assert done.returncode != 0 and "append-only" in done.stderr
    done = sqlite3_cli(db, REPLACE_EVENT.replace("INSERT OR REPLACE", "INSERT OR IGNORE"))
    assert "append-only" in done.stderr
    still_there(ledger)
    ledger.close()


def test_a_plain_python_sqlite3_connection_cannot_rewrite_anything(tmp_path: Path) -> None:
    """python's sqlite3 module with default settings: UPDATE, DELETE and INSERT OR REPLACE of events,
    blobs and batches are all refused; flightlog's own re-delivery stays a no-op afterwards."""
    db = tmp_path / "l.db"
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    ledger.append(batch([event(0), event(1)]))
    plain = sqlite3.connect(db)
    attempts = [
        REPLACE_EVENT,
        "UPDATE events SET status = 1",
        "DELETE FROM events",
        "INSERT OR REPLACE INTO blobs SELECT sha256, 1, 1, location, codec, x'00', created_at FROM blobs",
        "UPDATE blobs SET size = 0",
        "DELETE FROM blobs",
        "INSERT OR REPLACE INTO batches (batch_id, collector, position, received, new, duplicates,"
        " conflicts, raw_bytes, stored_bytes, committed_at) SELECT batch_id, collector, 9, 0, 0, 0, '[]',"
        " 0, 0, committed_at FROM batches",
        "UPDATE batches SET digest = 'x'",
        "DELETE FROM batches",
    ]
    for sql in attempts:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            plain.execute(sql)
    plain.close()
    still_there(ledger)
    again = ledger.append(batch([event(0), event(1)]))
    assert (again.new, again.duplicates) == (0, 2), "ON CONFLICT-style re-delivery still idempotent"
    ledger.close()


def test_batches_are_append_only_on_both_engines(ledger: Ledger) -> None:
    """The batch rows carry the chain: UPDATE and DELETE of them are refused like events."""
    assert "append-only" in refused(ledger, "UPDATE batches SET digest = 'forged'")
    assert "append-only" in refused(ledger, "DELETE FROM batches")
    if ledger.engine.dialect.name == "postgresql":
        assert "append-only" in refused(ledger, "TRUNCATE batches")


def test_blobs_are_append_only_too(ledger: Ledger) -> None:
    """A stored payload cannot be rewritten in place: its address would lie."""
    assert "append-only" in refused(ledger, "UPDATE blobs SET size = 0")
    assert "append-only" in refused(ledger, "DELETE FROM blobs")


def test_the_payload_check_ties_state_to_hash_and_size(ledger: Ledger) -> None:
    """A row claiming a complete payload without a hash, or a hash with state none, is refused."""
    base = (
        "INSERT INTO events (event_id, action_id, collector, seq, at, kind, direction, head,"
        " payload_state, payload_sha256, payload_size, payload_text, redacted) VALUES"
    )
    sha = ledger.event("ev-000000").payload_sha256  # type: ignore[union-attr]
    for values in (
        "('x1', 'a', 'c', 0, '2026-01-01', 'k', 'in', '', 'complete', NULL, NULL, NULL, '[]')",
        f"('x2', 'a', 'c', 0, '2026-01-01', 'k', 'in', '', 'none', '{sha}', 3, true, '[]')",
    ):
        message = refused(ledger, f"{base} {values}".replace("''", "x''"))
        assert "payload_state" in message or "CHECK" in message
