"""Events say when their text was escaped, and answers when their first and last bytes arrived.

`escaped`: the text columns hold `storage.escaped`'s lossless form (a URL with invalid UTF-8, a NUL
in a header), the exact bytes being in `head`. `first_byte_ms`, `last_byte_ms`: an answer's bytes,
milliseconds after its request started; `first_token_ms`: a streamed AI answer's first token. Null
where unknown (every event recorded before this revision). Indexed for "slowest calls" and
"slower than 2s" questions.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("escaped", sa.Boolean, nullable=False, server_default=sa.false()))
    for column in ("first_byte_ms", "last_byte_ms", "first_token_ms"):
        op.add_column("events", sa.Column(column, sa.Float))
    op.create_index("ix_events_last_byte_ms", "events", ["last_byte_ms"])


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
