"""Answers say which of their tokens a provider prices apart: cache reads, cache writes, reasoning.

`cache_read_tokens` and `cache_write_tokens` count those of `tokens_in` (which keeps counting every
input token) read from or written to the provider's prompt cache; `reasoning_tokens` those of
`tokens_out` (every output token) the model spent reasoning. Null where the answer did not say
(and on every event recorded before this revision).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("cache_read_tokens", sa.BigInteger))
    op.add_column("events", sa.Column("cache_write_tokens", sa.BigInteger))
    op.add_column("events", sa.Column("reasoning_tokens", sa.BigInteger))


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
