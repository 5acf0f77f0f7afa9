"""The batch chain and append-only from any connection.

Each batch row gains its link in its collector's chain (storage/chain/links.py): `chain_index` (1, 2, ...
per collector), `digest`, the `event_ids` it inserted (JSON array, digest order), a short prefix of
each event's leaf (`event_leaves`) and the `event_columns` its rows were hashed over. Batches
recorded before this revision keep NULL there: their events are counted, not chained, and each
collector's first chained batch links to a genesis digest of those earlier batch rows.

SQLite: `recursive_triggers` is a per-connection pragma, so `INSERT OR REPLACE` from a plain
`sqlite3` client deleted the old row without firing the delete trigger. A BEFORE INSERT trigger that
refuses an id already stored closes that on every connection (it fires before conflict resolution,
so flightlog offers only new ids). Batches become append-only too, on both engines.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

KEYS = {"events": "event_id", "blobs": "sha256", "batches": "batch_id"}

SQLITE_NO_REINSERT = """
CREATE TRIGGER {table}_no_reinsert BEFORE INSERT ON {table}
WHEN EXISTS (SELECT 1 FROM {table} WHERE {key} = NEW.{key})
BEGIN SELECT RAISE(ABORT,
  'flightlog: {table} are append-only: a second row for a recorded {key} refused'); END;
"""
SQLITE_BATCHES = """
CREATE TRIGGER batches_no_update BEFORE UPDATE ON batches
BEGIN SELECT RAISE(ABORT, 'flightlog: batches are append-only: UPDATE refused'); END;
CREATE TRIGGER batches_no_delete BEFORE DELETE ON batches
BEGIN SELECT RAISE(ABORT, 'flightlog: batches are append-only: DELETE refused'); END;
"""
PG_BATCHES = (
    "CREATE TRIGGER batches_no_change BEFORE UPDATE OR DELETE ON batches"
    " FOR EACH ROW EXECUTE FUNCTION flightlog_refuse_change()",
    "CREATE TRIGGER batches_no_truncate BEFORE TRUNCATE ON batches"
    " FOR EACH STATEMENT EXECUTE FUNCTION flightlog_refuse_change()",
)


def upgrade() -> None:
    for name, kind in (
        ("chain_index", sa.BigInteger),
        ("digest", sa.Text),
        ("event_ids", sa.Text),
        ("event_leaves", sa.Text),
        ("event_columns", sa.Text),
    ):
        op.add_column("batches", sa.Column(name, kind, nullable=True))
    op.create_index("ix_batches_chain", "batches", ["collector", "chain_index"], unique=True)
    if op.get_bind().dialect.name == "postgresql":
        for statement in PG_BATCHES:
            op.execute(statement)
        return
    for table, key in KEYS.items():
        op.execute(SQLITE_NO_REINSERT.format(table=table, key=key).strip())
    for statement in SQLITE_BATCHES.split("END;"):
        if statement.strip():
            op.execute(statement + "END;")


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
