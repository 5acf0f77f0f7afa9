"""The Ledger: events, blobs, batches, positions, the payload CHECK and append-only triggers.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PAYLOAD_CHECK = (
    "(payload_state IN ('complete', 'partial') AND payload_sha256 IS NOT NULL"
    " AND payload_size IS NOT NULL AND payload_text IS NOT NULL)"
    " OR (payload_state IN ('none', 'artifact', 'missing') AND payload_sha256 IS NULL"
    " AND payload_size IS NULL AND payload_text IS NULL)"
)
QUERY_INDEXES = ("action_id", "status")
TIMELINE_INDEXES = ("session", "task", "tool", "agent", "model", "host", "kind")
HOUR_INDEX = {
    # The hour bucket the counts group by, as storage.queries writes it (literals, so it matches);
    # on SQLite the index also covers the summed columns, so counting by hour never reads the table.
    "sqlite": "CREATE INDEX ix_events_hour ON events (substr(at, 1, 13), tokens_in, tokens_out, cost_usd)",
    "postgresql": "CREATE INDEX ix_events_hour ON events ((date_trunc('hour', at AT TIME ZONE 'UTC')))",
}
APPEND_ONLY = ("events", "blobs")

SQLITE_TRIGGERS = """
CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
BEGIN SELECT RAISE(ABORT, 'flightlog: {table} are append-only: UPDATE refused'); END;
CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
BEGIN SELECT RAISE(ABORT, 'flightlog: {table} are append-only: DELETE refused'); END;
"""

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION flightlog_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'flightlog: % are append-only: % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$
"""
PG_TRIGGERS = """
CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table}
  FOR EACH ROW EXECUTE FUNCTION flightlog_refuse_change();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
  FOR EACH STATEMENT EXECUTE FUNCTION flightlog_refuse_change();
"""


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("stored_size", sa.BigInteger, nullable=False),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("codec", sa.Text, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=True),
        sa.Column("created_at", tz, nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
        sa.CheckConstraint(
            "(location = 'inline' AND data IS NOT NULL) OR (location = 'store' AND data IS NULL)",
            name="ck_blobs_location",
        ),
    )
    op.create_table(
        "events",
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("action_id", sa.Text, nullable=False),
        sa.Column("collector", sa.Text, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("at", tz, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("direction", sa.Text, nullable=False),
        sa.Column("method", sa.Text),
        sa.Column("url", sa.Text),
        sa.Column("host", sa.Text),
        sa.Column("status", sa.Integer),
        sa.Column("tool", sa.Text),
        sa.Column("session", sa.Text),
        sa.Column("task", sa.Text),
        sa.Column("turn", sa.Text),
        sa.Column("agent", sa.Text),
        sa.Column("model", sa.Text),
        sa.Column("tokens_in", sa.BigInteger),
        sa.Column("tokens_out", sa.BigInteger),
        sa.Column("cost_usd", sa.Float),
        sa.Column("head", sa.LargeBinary, nullable=False),
        sa.Column("payload_state", sa.Text, nullable=False),
        sa.Column("payload_sha256", sa.Text, nullable=True),
        sa.Column("payload_size", sa.BigInteger),
        sa.Column("payload_text", sa.Boolean),
        sa.Column("redacted", sa.Text, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("parent", sa.Text),
        sa.PrimaryKeyConstraint("event_id", name="pk_events"),
        sa.ForeignKeyConstraint(["payload_sha256"], ["blobs.sha256"], name="fk_events_payload_sha256_blobs"),
        sa.CheckConstraint(PAYLOAD_CHECK, name="ck_events_payload_state"),
        sa.CheckConstraint("direction IN ('in', 'out')", name="ck_events_direction"),
        sa.CheckConstraint(
            "payload_state IN ('complete', 'partial', 'none', 'artifact', 'missing')",
            name="ck_events_payload_state_known",
        ),
    )
    op.create_index("ix_events_at", "events", ["at", "event_id"])
    for column in QUERY_INDEXES:
        op.create_index(f"ix_events_{column}", "events", [column])
    for column in TIMELINE_INDEXES:  # a filtered page is read in index order, newest first
        op.create_index(f"ix_events_{column}_at", "events", [column, "at", "event_id"])
    op.execute(HOUR_INDEX[op.get_bind().dialect.name])
    op.create_table(
        "batches",
        sa.Column("batch_id", sa.Text, nullable=False),
        sa.Column("collector", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("received", sa.Integer, nullable=False),
        sa.Column("new", sa.Integer, nullable=False),
        sa.Column("duplicates", sa.Integer, nullable=False),
        sa.Column("conflicts", sa.Text, nullable=False),
        sa.Column("raw_bytes", sa.BigInteger, nullable=False),
        sa.Column("stored_bytes", sa.BigInteger, nullable=False),
        sa.Column("committed_at", tz, nullable=False),
        sa.PrimaryKeyConstraint("batch_id", name="pk_batches"),
    )
    op.create_table(
        "positions",
        sa.Column("collector", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("updated_at", tz, nullable=False),
        sa.PrimaryKeyConstraint("collector", name="pk_positions"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL")
        op.execute(PG_FUNCTION)
        for table in APPEND_ONLY:
            for statement in PG_TRIGGERS.format(table=table).split(";"):
                if statement.strip():
                    op.execute(statement)
    else:
        for table in APPEND_ONLY:
            for statement in SQLITE_TRIGGERS.format(table=table).split("END;"):
                if statement.strip():
                    op.execute(statement + "END;")


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
