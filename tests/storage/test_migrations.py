"""Opening a ledger creates or migrates its schema, and the result is exactly the SQLModel schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from storage.engine import make_engine
from storage.events import Event
from storage.ledger import open_ledger
from storage.migrate import _config, current_revision, head_revision, migrate
from storage.rows import COLUMNS, to_row
from storage.schema import EventRow, metadata
from tests.storage.factory import event

LEDGER_TABLES = {"events", "blobs", "batches", "positions", "token_uses", "chain_keys"}


def test_a_blank_database_is_created_at_the_newest_revision(ledger_url: str, tmp_path: Path) -> None:
    """open_ledger on an empty database leaves it at head with the Ledger's four tables."""
    ledger = open_ledger(ledger_url, (tmp_path / "b").as_uri())
    assert current_revision(ledger.engine) == head_revision()
    ledger.close()


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection")
def test_the_migrated_schema_is_the_sqlmodel_schema(ledger_url: str, tmp_path: Path) -> None:
    """No difference between the migrations' DDL and the SQLModel definition of the Ledger tables."""
    ledger = open_ledger(ledger_url, (tmp_path / "b").as_uri())
    with ledger.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), metadata)

    def table_of(diff: object) -> str | None:
        item = diff[0] if isinstance(diff, list) else diff
        for part in item[1:] if isinstance(item, tuple) else ():
            name = getattr(part, "name", None) if not isinstance(part, str) else part
            table = getattr(part, "table", None)
            if table is not None:
                return str(table.name)
            if name in LEDGER_TABLES:
                return str(name)
        return None

    def is_hour_index(diff: object) -> bool:
        """The dialect-specific expression index lives in the migration alone (see schema.py)."""
        return isinstance(diff, tuple) and getattr(diff[1], "name", None) == "ix_events_hour"

    relevant = [d for d in diffs if table_of(d) in LEDGER_TABLES and not is_hour_index(d)]
    assert relevant == []
    ledger.close()


def test_every_older_schema_migrates_forward_with_its_data(ledger_url: str, tmp_path: Path) -> None:
    """From each earlier revision, events recorded there survive the migration to the newest."""
    script = ScriptDirectory.from_config(_config())
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    assert revisions[0] == "0001"
    for i, revision in enumerate(revisions):
        url = ledger_url if i == 0 else None
        if url is None:
            if ledger_url.startswith("sqlite"):
                url = f"sqlite:///{tmp_path / f'r{i}.db'}"
            else:
                continue  # one PostgreSQL database per test: the oldest revision is the one checked
        engine = make_engine(url)
        migrate(engine, revision)
        assert current_revision(engine) == revision
        _record_at_old_revision(engine, [event(0, None), event(1, None)])  # while the schema is at `revision`
        migrate(engine)
        assert current_revision(engine) == head_revision()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 2
        reopened = open_ledger(url, (tmp_path / f"b{i}").as_uri())
        assert reopened.event("ev-000001") is not None
        reopened.close()
        engine.dispose()


def _record_at_old_revision(engine: Engine, events: list[Event]) -> None:
    """Insert events the way the code of an older revision did: only the columns its table has."""
    present = {c["name"] for c in inspect(engine).get_columns("events")}
    with engine.begin() as conn:
        for e in events:
            row = {k: v for k, v in zip(COLUMNS, to_row(e, None), strict=True) if k in present}
            conn.execute(EventRow.__table__.insert().values(**row))  # type: ignore[attr-defined]


def test_the_newest_file_is_alembics_head() -> None:
    """The cheap up-to-date check (migration file names) agrees with alembic's own head."""
    from storage.migrate import newest_revision

    assert newest_revision() == head_revision()


def test_sqlite_checks_lose_their_in_lists_and_refuse_the_same_rows(tmp_path: Path) -> None:
    """A SQLite ledger made at 0005 (checks with `IN (...)`, which SQLite rebuilds per inserted row)
    is migrated to `=`/`OR` checks in place: its rows stay, the stored text has no `IN (` left, and
    a bad direction, an unknown payload state and a complete payload without a hash are still refused
    while a good row is taken."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    migrate(engine, "0005")
    _record_at_old_revision(engine, [event(0, None)])

    def events_sql() -> str:
        with engine.connect() as conn:
            return str(conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'events'").scalar())

    assert " IN (" in events_sql()
    migrate(engine)
    assert " IN (" not in events_sql() and "payload_state = 'artifact'" in events_sql()
    good = dict(zip(COLUMNS, to_row(event(1, None), None), strict=True))
    bad = [
        {**good, "event_id": "x1", "direction": "sideways"},
        {**good, "event_id": "x2", "payload_state": "unknown"},
        {**good, "event_id": "x3", "payload_state": "complete"},  # no hash, size or text
    ]
    table = EventRow.__table__  # type: ignore[attr-defined]
    for row in bad:
        with pytest.raises(Exception, match="CHECK constraint failed"), engine.begin() as conn:
            conn.execute(table.insert().values(**row))
    with engine.begin() as conn:
        conn.execute(table.insert().values(**good))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 2
        assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    engine.dispose()
