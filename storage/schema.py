"""The Ledger's tables, defined once with SQLModel: `events`, `blobs`, `batches`, `positions`, and
the scoped tokens' `token_uses`.

These classes are the schema's single definition; migrations (storage/migrations) create exactly
this, and a test compares the migrated database with this metadata. The hot insert path does not go
through the ORM (see storage/append.py) but writes these same columns.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Text,
    text,
)
from sqlalchemy import false as sa_false
from sqlmodel import Field, SQLModel

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING

PAYLOAD_CHECK = (
    "((payload_state = 'complete' OR payload_state = 'partial') AND payload_sha256 IS NOT NULL"
    " AND payload_size IS NOT NULL AND payload_text IS NOT NULL)"
    " OR ((payload_state = 'none' OR payload_state = 'artifact' OR payload_state = 'missing')"
    " AND payload_sha256 IS NULL AND payload_size IS NULL AND payload_text IS NULL)"
)
"""A row cannot claim a payload it does not have, nor carry an address for one it says it lacks.

The checks are written with `=` and `OR`, not `IN (...)`: SQLite builds an `IN` list's table again for
every row an `executemany` inserts (migration 0006)."""

QUERY_INDEXES = ("action_id", "status")
"""Columns looked up by value (an action's events, errors)."""
TIMELINE_INDEXES = ("session", "task", "tool", "agent", "model", "host", "kind")
SPARSE = frozenset({"status", "task", "tool", "last_byte_ms"})
"""Columns NULL on most events: their indexes are partial (`WHERE column IS NOT NULL`, migration
0005), so an insert skips them for a row without a value; every read of them compares with a value."""


def _index(name: str, *columns: str) -> Index:
    """An index of `events`, partial when its first column is sparse."""
    if columns[0] not in SPARSE:
        return Index(name, *columns)
    where = text(f"{columns[0]} IS NOT NULL")
    return Index(name, *columns, sqlite_where=where, postgresql_where=where)


"""Columns the read routes and the browser filter on: `(column, at, event_id)`, so a filtered page
is read in index order instead of walking the whole timeline. (The hour-bucket expression index the
counts use is dialect-specific and lives in the migrations alone: 0001, and 0007 for SQLite's.)"""


class EventRow(SQLModel, table=True):
    """One thing that happened. Append-only: the database refuses UPDATE, DELETE and TRUNCATE."""

    __tablename__ = "events"
    __table_args__ = (
        CheckConstraint(PAYLOAD_CHECK, name="payload_state"),
        CheckConstraint("(direction = 'in' OR direction = 'out')", name="direction"),
        CheckConstraint(
            "(payload_state = 'complete' OR payload_state = 'partial' OR payload_state = 'none'"
            " OR payload_state = 'artifact' OR payload_state = 'missing')",
            name="payload_state_known",
        ),
        Index("ix_events_at", "at", "event_id"),
        *(_index(f"ix_events_{c}", c) for c in QUERY_INDEXES),
        *(_index(f"ix_events_{c}_at", c, "at", "event_id") for c in TIMELINE_INDEXES),
        _index("ix_events_last_byte_ms", "last_byte_ms"),
    )

    event_id: str = Field(sa_column=Column(Text, primary_key=True))
    action_id: str = Field(sa_column=Column(Text, nullable=False))
    collector: str = Field(sa_column=Column(Text, nullable=False))
    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    kind: str = Field(sa_column=Column(Text, nullable=False))
    direction: str = Field(sa_column=Column(Text, nullable=False))
    method: str | None = Field(default=None, sa_column=Column(Text))
    url: str | None = Field(default=None, sa_column=Column(Text))
    host: str | None = Field(default=None, sa_column=Column(Text))
    status: int | None = Field(default=None, sa_column=Column(Integer))
    tool: str | None = Field(default=None, sa_column=Column(Text))
    session: str | None = Field(default=None, sa_column=Column(Text))
    task: str | None = Field(default=None, sa_column=Column(Text))
    turn: str | None = Field(default=None, sa_column=Column(Text))
    agent: str | None = Field(default=None, sa_column=Column(Text))
    model: str | None = Field(default=None, sa_column=Column(Text))
    tokens_in: int | None = Field(default=None, sa_column=Column(BigInteger))
    tokens_out: int | None = Field(default=None, sa_column=Column(BigInteger))
    cost_usd: float | None = Field(default=None, sa_column=Column(Float))
    head: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    payload_state: str = Field(sa_column=Column(Text, nullable=False))
    payload_sha256: str | None = Field(
        default=None, sa_column=Column(Text, ForeignKey("blobs.sha256"), nullable=True)
    )
    payload_size: int | None = Field(default=None, sa_column=Column(BigInteger))
    payload_text: bool | None = Field(default=None, sa_column=Column(Boolean))
    redacted: str = Field(sa_column=Column(Text, nullable=False))
    """The secret names replaced in this event, as a JSON array (readable with plain SQL tools)."""
    error: str | None = Field(default=None, sa_column=Column(Text))
    parent: str | None = Field(default=None, sa_column=Column(Text))
    escaped: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=sa_false()))
    """The text columns hold `storage.escaped`'s lossless form; the exact bytes are in `head`."""
    first_byte_ms: float | None = Field(default=None, sa_column=Column(Float))
    """An answer's first byte, milliseconds after its request started."""
    last_byte_ms: float | None = Field(default=None, sa_column=Column(Float))
    """An answer's last byte, milliseconds after its request started."""
    first_token_ms: float | None = Field(default=None, sa_column=Column(Float))
    """A streamed AI answer's first token, milliseconds after its request started."""
    client_bytes: int | None = Field(default=None, sa_column=Column(BigInteger))
    """Of an answer's body, the bytes passed on to the client."""
    client_left_ms: float | None = Field(default=None, sa_column=Column(Float))
    """When the client left while its answer was still due, milliseconds after its request started."""
    cache_read_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    """Of `tokens_in`, those read from the provider's prompt cache (priced at its cache-read rate)."""
    cache_write_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    """Of `tokens_in`, those written to the provider's prompt cache (priced at its cache-write rate)."""
    reasoning_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    """Of `tokens_out`, the model's reasoning (priced as output)."""
    cache_write_1h_tokens: int | None = Field(default=None, sa_column=Column(BigInteger))
    """Of `cache_write_tokens`, those kept for an hour (priced at the provider's one-hour write rate)."""


class BlobRow(SQLModel, table=True):
    """One payload, stored once under the SHA-256 of its bytes: inline (zstd) or in the blob store."""

    __tablename__ = "blobs"
    __table_args__ = (
        CheckConstraint(
            "(location = 'inline' AND data IS NOT NULL) OR (location = 'store' AND data IS NULL)",
            name="location",
        ),
    )

    sha256: str = Field(sa_column=Column(Text, primary_key=True))
    size: int = Field(sa_column=Column(BigInteger, nullable=False))
    stored_size: int = Field(sa_column=Column(BigInteger, nullable=False))
    location: str = Field(sa_column=Column(Text, nullable=False))
    codec: str = Field(sa_column=Column(Text, nullable=False))
    data: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    created_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class BatchRow(SQLModel, table=True):
    """The accounting of one delivered batch (bookkeeping, not an event), and its link in the
    collector's chain of digests (storage/chain/links.py; NULL for batches from before the chain)."""

    __tablename__ = "batches"
    __table_args__ = (Index("ix_batches_chain", "collector", "chain_index", unique=True),)

    batch_id: str = Field(sa_column=Column(Text, primary_key=True))
    collector: str = Field(sa_column=Column(Text, nullable=False))
    position: int = Field(sa_column=Column(BigInteger, nullable=False))
    received: int = Field(sa_column=Column(Integer, nullable=False))
    new: int = Field(sa_column=Column(Integer, nullable=False))
    duplicates: int = Field(sa_column=Column(Integer, nullable=False))
    conflicts: str = Field(sa_column=Column(Text, nullable=False))
    """Event ids that arrived with other content than stored, as a JSON array."""
    raw_bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    stored_bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    committed_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    chain_index: int | None = Field(default=None, sa_column=Column(BigInteger))
    """1, 2, ... per collector, in commit order."""
    digest: str | None = Field(default=None, sa_column=Column(Text))
    """SHA-256 (hex) over the previous batch's digest, this batch's header and its events' leaves."""
    event_ids: str | None = Field(default=None, sa_column=Column(Text))
    """The events this batch inserted, as a JSON array in digest order (sorted by event_id)."""
    event_leaves: str | None = Field(default=None, sa_column=Column(Text))
    """The first 16 hex digits of each event's leaf, in the same order: names a rewritten row."""
    event_columns: str | None = Field(default=None, sa_column=Column(Text))
    """The event columns the leaves cover, comma-separated (new nullable columns join later batches)."""
    signature: str | None = Field(default=None, sa_column=Column(Text))
    """The collector's Ed25519 signature of `digest` (storage/chain/signing.py); NULL before signatures."""


class PositionRow(SQLModel, table=True):
    """Each collector's delivered position, so a restarted collector knows where to resume."""

    __tablename__ = "positions"

    collector: str = Field(sa_column=Column(Text, primary_key=True))
    position: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class TokenUseRow(SQLModel, table=True):
    """One use of a scoped token (bookkeeping, not an event): the key (token, use) is unique, so two
    proxies racing for a token's last use insert one row between them. Append-only."""

    __tablename__ = "token_uses"

    token: str = Field(sa_column=Column(Text, primary_key=True))
    """The token's identifier (shared by everything attenuated from it)."""
    use: int = Field(sa_column=Column(Integer, primary_key=True))
    """1, 2, ... per token, never above the token's `uses` limit."""
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    verb: str = Field(sa_column=Column(Text, nullable=False))
    door: str = Field(sa_column=Column(Text, nullable=False))


class ChainKeyRow(SQLModel, table=True):
    """A collector's key registration (storage/chain/seal.py): which key its chain's digests are
    keyed with (by id, never the key), where its keyed part begins, and the seal of what no key
    covers; MACed with the key. Written with the collector's first keyed batch. Append-only."""

    __tablename__ = "chain_keys"

    collector: str = Field(sa_column=Column(Text, primary_key=True))
    key_id: str = Field(sa_column=Column(Text, nullable=False))
    first_index: int = Field(sa_column=Column(BigInteger, nullable=False))
    seal: str = Field(sa_column=Column(Text, nullable=False))
    mac: str = Field(sa_column=Column(Text, nullable=False))
    registered_at: str = Field(sa_column=Column(Text, nullable=False))
    """The registering batch's commit time, as the chain's canonical text (UTC)."""


class SigningKeyRow(SQLModel, table=True):
    """A collector's Ed25519 public key registered under the operator's root key
    (storage/chain/registry.py), with the seal of what no signature covers. Append-only."""

    __tablename__ = "signing_keys"

    collector: str = Field(sa_column=Column(Text, primary_key=True))
    public_key: str = Field(sa_column=Column(Text, nullable=False))
    first_index: int = Field(sa_column=Column(BigInteger, nullable=False))
    """The index of the collector's first signed batch."""
    seal: str = Field(sa_column=Column(Text, nullable=False))
    root_key: str = Field(sa_column=Column(Text, nullable=False))
    """The root's public key, whose signature this row carries (a verifier decides whether to trust it)."""
    signature: str = Field(sa_column=Column(Text, nullable=False))
    registered_at: str = Field(sa_column=Column(Text, nullable=False))


class PrunedRow(SQLModel, table=True):
    """A payload whose bytes were removed under a signed prune event (storage/retention/prune.py):
    its blob row stays, emptied (inline) or without its object (store). Append-only."""

    __tablename__ = "pruned"

    sha256: str = Field(sa_column=Column(Text, primary_key=True))
    event_id: str = Field(sa_column=Column(Text, nullable=False))
    """The `ledger.prune` event whose signed record names this payload."""
    pruned_at: str = Field(sa_column=Column(Text, nullable=False))
    reason: str = Field(sa_column=Column(Text, nullable=False))


metadata: MetaData = SQLModel.metadata
