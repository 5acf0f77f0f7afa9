"""Keyed chains: each collector's key registration, `chain_keys` (storage/chain/seal.py).

From this revision on a collector's batch digests are HMACs under a key kept in FLIGHTLOG_HOME
(storage/chain/keys.py), and its first keyed batch registers it here: the key's id, the index of
its first keyed batch, the seal of what no key covers, MACed with the key. The chains written
before stay as they are: `ledger verify` checks them as before and says they are unkeyed. The table
is append-only like the batches.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = (
    "CREATE TRIGGER chain_keys_no_update BEFORE UPDATE ON chain_keys"
    " BEGIN SELECT RAISE(ABORT, 'flightlog: chain_keys are append-only: UPDATE refused'); END;",
    "CREATE TRIGGER chain_keys_no_delete BEFORE DELETE ON chain_keys"
    " BEGIN SELECT RAISE(ABORT, 'flightlog: chain_keys are append-only: DELETE refused'); END;",
)
PG_TRIGGERS = (
    "CREATE TRIGGER chain_keys_no_change BEFORE UPDATE OR DELETE ON chain_keys"
    " FOR EACH ROW EXECUTE FUNCTION flightlog_refuse_change()",
    "CREATE TRIGGER chain_keys_no_truncate BEFORE TRUNCATE ON chain_keys"
    " FOR EACH STATEMENT EXECUTE FUNCTION flightlog_refuse_change()",
)


def upgrade() -> None:
    op.create_table(
        "chain_keys",
        sa.Column("collector", sa.Text, nullable=False),
        sa.Column("key_id", sa.Text, nullable=False),
        sa.Column("first_index", sa.BigInteger, nullable=False),
        sa.Column("seal", sa.Text, nullable=False),
        sa.Column("mac", sa.Text, nullable=False),
        sa.Column("registered_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("collector", name="pk_chain_keys"),
    )
    dialect = op.get_bind().dialect.name
    for statement in PG_TRIGGERS if dialect == "postgresql" else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
