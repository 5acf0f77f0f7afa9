"""Signed chains and pruning that verifies (issue 52).

- `batches.signature`: the collector's Ed25519 signature of the batch's chain digest
  (storage/chain/signing.py); NULL on batches written before.
- `signing_keys`: each collector's public key registered under the operator's root key, with the
  seal of what no signature covers (storage/chain/registry.py). Append-only.
- `pruned`: one row per payload whose bytes were removed, naming the prune event that removed them
  (storage/retention/prune.py). Append-only.
- The blobs' append-only trigger lets exactly one change through: an inline payload's bytes emptied
  (`data` of length 0, every other column as it was) when `pruned` names it, in the transaction that
  writes the signed prune event. Rows are never deleted: an event keeps its blob row, and a payload
  in the blob store loses its object, not its row.

Numbered 0020 so that another revision added meanwhile (0013...) can be put before it by renaming.

Revision ID: 0020
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0012"
branch_labels = None
depends_on = None

PRUNE_ONLY = (
    "OLD.location = 'inline' AND NEW.location = 'inline' AND NEW.sha256 = OLD.sha256"
    " AND NEW.size = OLD.size AND NEW.stored_size = OLD.stored_size AND NEW.codec = OLD.codec"
    " AND NEW.created_at = OLD.created_at AND {length}(NEW.data) = 0"
    " AND EXISTS (SELECT 1 FROM pruned WHERE pruned.sha256 = OLD.sha256)"
)
"""The one change of a blob row the trigger lets through: an inline payload's bytes emptied under
a prune record."""
SQLITE = (
    "DROP TRIGGER IF EXISTS blobs_no_update",
    "CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs WHEN NOT ("
    + PRUNE_ONLY.format(length="length")
    + ") BEGIN SELECT RAISE(ABORT, 'flightlog: blobs are append-only: UPDATE refused"
    " (a payload is emptied only under a prune record)'); END;",
    *(
        f"CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}"
        f" BEGIN SELECT RAISE(ABORT, 'flightlog: {table} are append-only: {verb} refused'); END;"
        for table in ("signing_keys", "pruned")
        for verb in ("UPDATE", "DELETE")
    ),
)
PG = (
    "CREATE OR REPLACE FUNCTION flightlog_blob_change() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n"
    f"  IF TG_OP = 'UPDATE' AND {PRUNE_ONLY.format(length='octet_length')} THEN RETURN NEW; END IF;\n"
    "  RAISE EXCEPTION 'flightlog: % are append-only: % refused', TG_TABLE_NAME, TG_OP\n"
    "    USING ERRCODE = 'insufficient_privilege';\nEND $$",
    "DROP TRIGGER IF EXISTS blobs_no_change ON blobs",
    "CREATE TRIGGER blobs_no_change BEFORE UPDATE OR DELETE ON blobs"
    " FOR EACH ROW EXECUTE FUNCTION flightlog_blob_change()",
    *(
        statement
        for table in ("signing_keys", "pruned")
        for statement in (
            f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION flightlog_refuse_change()",
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}"
            " FOR EACH STATEMENT EXECUTE FUNCTION flightlog_refuse_change()",
        )
    ),
)


def upgrade() -> None:
    op.add_column("batches", sa.Column("signature", sa.Text, nullable=True))
    op.create_table(
        "signing_keys",
        sa.Column("collector", sa.Text, nullable=False),
        sa.Column("public_key", sa.Text, nullable=False),
        sa.Column("first_index", sa.BigInteger, nullable=False),
        sa.Column("seal", sa.Text, nullable=False),
        sa.Column("root_key", sa.Text, nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.Column("registered_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("collector", name="pk_signing_keys"),
    )
    op.create_table(
        "pruned",
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("event_id", sa.Text, nullable=False),
        sa.Column("pruned_at", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_pruned"),
    )
    for statement in PG if op.get_bind().dialect.name == "postgresql" else SQLITE:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
