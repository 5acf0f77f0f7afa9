"""Scoped tokens' uses, counted once for every proxy on one Ledger: the `token_uses` table.

A use is spent by inserting the row (token, use number) with the next number, only while fewer than
the token's limit are recorded: the key makes two writers racing for the last use insert one row,
whichever process, proxy or engine they run in (storage/token_uses.py). The table is append-only
like the events.

Uses counted before this revision (the door's `dispatch.call` events naming the token, whose action
was not refused) are copied in, numbered in the order they were made, so a spent token stays spent.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = (
    "CREATE TRIGGER token_uses_no_update BEFORE UPDATE ON token_uses"
    " BEGIN SELECT RAISE(ABORT, 'flightlog: token_uses are append-only: UPDATE refused'); END;",
    "CREATE TRIGGER token_uses_no_delete BEFORE DELETE ON token_uses"
    " BEGIN SELECT RAISE(ABORT, 'flightlog: token_uses are append-only: DELETE refused'); END;",
)
PG_TRIGGERS = (
    "CREATE TRIGGER token_uses_no_change BEFORE UPDATE OR DELETE ON token_uses"
    " FOR EACH ROW EXECUTE FUNCTION flightlog_refuse_change()",
    "CREATE TRIGGER token_uses_no_truncate BEFORE TRUNCATE ON token_uses"
    " FOR EACH STATEMENT EXECUTE FUNCTION flightlog_refuse_change()",
)
EARLIER = {
    # the token identifier on a call event's url: flightlog:dispatch/DOOR/TOOL?token=ID
    "sqlite": "substr(c.url, instr(c.url, '?token=') + 7)",
    "postgresql": "split_part(c.url, '?token=', 2)",
}
BACKFILL = """
INSERT INTO token_uses (token, use, at, verb, door)
SELECT token, ROW_NUMBER() OVER (PARTITION BY token ORDER BY at, event_id), at, 'call', 'earlier'
FROM (SELECT {token} AS token, c.at AS at, c.event_id AS event_id FROM events c
      WHERE c.kind = 'dispatch.call' AND c.url LIKE 'flightlog:dispatch/%?token=%'
      AND NOT EXISTS (SELECT 1 FROM events r WHERE r.action_id = c.action_id
                      AND r.kind = 'dispatch.refused')) AS calls
"""


def upgrade() -> None:
    op.create_table(
        "token_uses",
        sa.Column("token", sa.Text, nullable=False),
        sa.Column("use", sa.Integer, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verb", sa.Text, nullable=False),
        sa.Column("door", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("token", "use", name="pk_token_uses"),
    )
    dialect = op.get_bind().dialect.name
    op.execute(BACKFILL.format(token=EARLIER[dialect]))
    for statement in PG_TRIGGERS if dialect == "postgresql" else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
