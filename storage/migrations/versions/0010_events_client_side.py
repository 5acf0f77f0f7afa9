"""Answers say what their client got: the body bytes passed on to it, and when it left early.

`client_bytes`: of an answer's body, the bytes the proxy passed on to its client (fewer than the
payload's when the client left before the end; the payload is what the upstream sent).
`client_left_ms`: when the client left while its answer was still due, milliseconds after its
request started. Null where unknown (every event recorded before this revision).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("client_bytes", sa.BigInteger))
    op.add_column("events", sa.Column("client_left_ms", sa.Float))


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
