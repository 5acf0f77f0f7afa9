"""The indexes of columns most events leave empty hold only the events that have a value.

`status` (requests have none), `tool`, `task` and `last_byte_ms` (answers only) are NULL on most rows,
yet every insert updated their indexes too: each a measurable share of a row's insert on both engines
(bench.ledger, issue 14). Every read that uses them compares the column with a value
(`tool = ?`, `status >= 400`, `last_byte_ms > ?`), which both engines prove implies `IS NOT NULL`, so
the partial indexes serve the same reads. The other indexes are unchanged.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SPARSE = {
    "ix_events_status": ["status"],
    "ix_events_tool_at": ["tool", "at", "event_id"],
    "ix_events_task_at": ["task", "at", "event_id"],
    "ix_events_last_byte_ms": ["last_byte_ms"],
}


def upgrade() -> None:
    for name, columns in SPARSE.items():
        where = sa.text(f"{columns[0]} IS NOT NULL")
        op.drop_index(name, table_name="events")
        op.create_index(name, "events", columns, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
