"""Of an answer's cache writes, those kept for an hour: Anthropic prices a one-hour cache write at
twice the input rate, a five-minute one at 1.25 times, and says which it made
(`usage.cache_creation.ephemeral_1h_input_tokens`).

`cache_write_1h_tokens` counts those of `cache_write_tokens`; null where the answer did not say (and on
every event recorded before this revision, which `ledger reprice` prices as five-minute writes).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("cache_write_1h_tokens", sa.BigInteger))


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
