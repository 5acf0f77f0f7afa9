"""The batch chain: each batch row carries a digest of its events' canonical rows, chained to the
digest of the same collector's previous batch (the idea of git and Certificate Transparency logs).

Triggers only stop honest mistakes: whoever can drop them (any SQLite connection, a PostgreSQL
superuser with `session_replication_role = replica`) can rewrite rows. The chain makes that visible:
`storage.chain.rederive` re-derives every digest from the rows as stored, and an operator who wrote a
head digest down elsewhere can prove that no tail of batches was removed since.

The canonical row, the same whichever engine kept it: the values of the batch's `event_columns` in
that order, as a compact ASCII JSON array, where a datetime is its UTC text `YYYY-MM-DD
HH:MM:SS.ffffff`, bytes are decoded as latin-1 (so `\\u00XX` escapes), booleans, numbers and NULL
are JSON's own. A leaf is the SHA-256 of that text; the batch digest is
SHA-256(previous digest in hex, "\\n", the header JSON, "\\n", the leaves' 32 bytes each, in order).
The header names the version, collector, chain index, position, batch id, commit time, the column
list and the number of events. A collector's first batch chains to a genesis digest over the batch
rows it delivered before the chain existed (migration 0004), so those rows cannot be changed either.

The writer already holds the rows it inserts: the digest costs one JSON encoding and one SHA-256 per
row and one per batch, and no extra round trip per row.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Boolean, DateTime, LargeBinary
from sqlalchemy.engine import Connection

from storage.chain import seal as chain_seal
from storage.chain import signing
from storage.errors import StorageError
from storage.rows import COLUMNS
from storage.schema import EventRow
from storage.sqlite_setup import sqlite_time

VERSION: Final = "flightlog-chain/1"
KEYED_VERSION: Final = chain_seal.VERSION
SIGNED_VERSION: Final = signing.VERSION
LEAF_HEX: Final = 16
"""Hex digits of each leaf kept in `event_leaves`: enough to name the event whose row changed (the
digest itself covers the full leaves)."""

_TABLE = EventRow.__table__  # type: ignore[attr-defined]


def time_text(at: datetime | str) -> str:
    """A stored time as canonical UTC text (SQLite gives text, PostgreSQL an aware datetime): the
    text the SQLite writer stores (`sqlite_time`), whichever engine kept it."""
    return sqlite_time(datetime.fromisoformat(at) if isinstance(at, str) else at)


def _written(value: Any) -> str:
    """The canonical text of the two kinds of value JSON has no form of, as the writer holds them:
    bytes (latin-1) and a datetime (UTC text). The encoder asks only for these, once or twice a
    row: the exact type `to_row` gives is tried first (an `isinstance` of a union costs more
    than the rest of the call)."""
    if type(value) is bytes:
        return value.decode("latin-1")
    if isinstance(value, datetime):  # what `to_row` gives PostgreSQL's COPY: aware UTC
        return sqlite_time(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1")
    raise TypeError(f"no canonical form for {type(value).__name__}")


def _encoder(default: Callable[[Any], str] | None = None) -> Callable[[Any], str]:
    """Compact ASCII JSON, `default` giving the text of what JSON has no form of; CPython's C
    encoder called directly, without `JSONEncoder.encode`'s per-call set-up (the row loop's main cost)."""
    try:
        from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - CPython always has it
        c_make_encoder = None
    if c_make_encoder is None:  # pragma: no cover
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, default=default).encode
    c = c_make_encoder(None, default, encode_basestring_ascii, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        return "".join(c(value, 0))

    return encode


_encode = _encoder()
"""For values already canonical: bytes or a datetime raise `TypeError` (how `stored_leaf` tells a
forged row)."""
_encode_written = _encoder(_written)
"""For rows as the writer holds them (`written_leaves`)."""


def written_leaves(rows: Sequence[Sequence[Any]]) -> list[bytes]:
    """The leaves of rows as the writer inserts them (`to_row` tuples, in `COLUMNS` order).

    The row is encoded as it is (a tuple is a JSON array): the encoder turns its bytes and its
    time, whether aware UTC or already SQLite's canonical text, into their canonical text on the
    way (`_written`), so no second list is built per row.
    """
    sha = hashlib.sha256
    encode = _encode_written
    return [sha(encode(row).encode("ascii")).digest() for row in rows]


def _bool(value: Any) -> bool:
    return value if isinstance(value, bool) else {0: False, 1: True}[value]


@functools.lru_cache(maxsize=64)
def _plan(columns: tuple[str, ...]) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
    """Which stored values need turning into their canonical form: times (text on SQLite, datetimes
    on PostgreSQL), bytes and booleans (0/1 on SQLite). Everything else is compared as the engine
    gives it: a number stored as text, or the reverse, changes the leaf. KeyError for a column the
    events table does not have."""
    plan: list[tuple[int, Callable[[Any], Any]]] = []
    for i, name in enumerate(columns):
        kind = _TABLE.c[name].type
        if isinstance(kind, DateTime):
            plan.append((i, time_text))
        elif isinstance(kind, LargeBinary):
            plan.append((i, lambda v: bytes(v).decode("latin-1")))
        elif isinstance(kind, Boolean):
            plan.append((i, _bool))
    return tuple(plan)


def stored_leaf(values: Sequence[Any], columns: Sequence[str]) -> bytes | None:
    """The leaf of a row read back from either engine; None when a value could never have been
    written by flightlog (bytes in a text column, an unknown column): such a row is forged."""
    try:
        normal = list(values)
        if len(normal) != len(columns):
            return None
        for i, canonical in _plan(tuple(columns)):
            if normal[i] is not None:
                normal[i] = canonical(normal[i])
        return hashlib.sha256(_encode(normal).encode("ascii")).digest()
    except (KeyError, ValueError, TypeError, UnicodeError):
        return None


def header(
    collector: str,
    index: int,
    position: int,
    batch: str,
    committed: str,
    columns: Sequence[str],
    n: int,
    *,
    keyed: bool = False,
    signed: bool = False,
) -> bytes:
    """The batch's own facts that its digest binds (a keyed or signed batch's name its version)."""
    version = SIGNED_VERSION if signed else KEYED_VERSION if keyed else VERSION
    return _encode([version, collector, index, position, batch, committed, list(columns), n]).encode("ascii")


def digest(previous: str, head: bytes, leaves: Sequence[bytes], key: bytes | None = None) -> str:
    """One digest per batch over the previous digest, the header and the concatenated leaves: an
    HMAC-SHA256 under the collector's key (`storage.chain.keys`), or a plain SHA-256 for the
    batches written before keyed chains."""
    h = hmac.new(key, digestmod=hashlib.sha256) if key is not None else hashlib.sha256()
    h.update(previous.encode("ascii") + b"\n" + head + b"\n")
    h.update(b"".join(leaves))
    return h.hexdigest()


def genesis(collector: str, legacy: Sequence[Sequence[Any]]) -> str:
    """Where a collector's chain starts: a digest of the batch rows it delivered before the chain
    (batch_id, position, received, new), in (position, batch_id) order; none for a new ledger."""
    rows = sorted([str(r[0]), int(r[1]), int(r[2]), int(r[3])] for r in legacy)
    rows.sort(key=lambda r: (r[1], r[0]))
    return hashlib.sha256(_encode([VERSION, "genesis", collector, rows]).encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class Link:
    """What a new batch row stores of the chain."""

    index: int
    digest: str
    event_ids: str
    event_leaves: str
    event_columns: str
    signature: str | None = None
    """The collector's Ed25519 signature of the digest (`storage.chain.signing`); None unsigned."""


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


class DriverCursor:
    """The driver's own cursor in `conn`'s transaction, for the writer's statements:
    `with DriverCursor(conn) as cursor`.

    SQLAlchemy's execution context cost more CPU than the small statements themselves (at one
    request a commit, about a fifth of the writer's, bench.writer). Errors come unwrapped, which
    `storage.errors.from_library` maps the same; a lost connection is invalidated here, as SQLAlchemy
    would, so the pool never hands it out again and the Ledger's retry gets a new one, whichever
    statement (a query, the rows' insert or COPY) met the loss. A class, not a generator: entered
    for every statement of every commit, it costs half as much."""

    __slots__ = ("conn", "cursor", "raw")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.raw: Any = conn.connection.driver_connection

    def __enter__(self) -> Any:
        self.cursor = self.raw.cursor()
        return self.cursor

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        dialect = self.conn.dialect
        lost = isinstance(error, dialect.loaded_dbapi.Error) and dialect.is_disconnect(
            error, self.raw, self.cursor
        )
        self.cursor.close()
        if lost:
            self.conn.invalidate(error)


def query(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of one small query in the driver's own parameter style, on a `DriverCursor`."""
    with DriverCursor(conn) as cursor:
        cursor.execute(sql, tuple(params))
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []


def legacy_batches(conn: Connection, collector: str) -> list[tuple[Any, ...]]:
    """The collector's batch rows from before the chain (no chain index)."""
    sql = (
        "SELECT batch_id, position, received, new FROM batches"
        f" WHERE collector = {_mark(conn)} AND chain_index IS NULL"
    )
    return query(conn, sql, (collector,))


def _lock_key(collector: str) -> int:
    return int.from_bytes(
        hashlib.sha256(b"flightlog-chain\x00" + collector.encode()).digest()[:8], signed=True
    )


def lock(conn: Connection, collector: str) -> None:
    """Inside the write transaction, before reading the head: on PostgreSQL a per-collector lock, so
    two writers of one collector never fork its chain (SQLite's BEGIN IMMEDIATE already queues them)."""
    if conn.dialect.name == "postgresql":
        query(conn, "SELECT pg_advisory_xact_lock(%s)", (_lock_key(collector),))


@dataclass(frozen=True, slots=True)
class ChainHead:
    """Where a collector's chain stands, read inside the write transaction (after `lock`)."""

    index: int
    digest: str
    mac_key: str | None
    """The id of the MAC key it registered (`storage.chain.seal`), if any."""
    signing_key: str | None
    """The public key it registered under the root (`storage.chain.registry`), if any."""


def chain_head(conn: Connection, collector: str, batch: str = "") -> ChainHead | None:
    """The collector's newest chained batch (index 0 and its genesis before its first); None when
    `batch` is already stored (a re-delivery). One query, after `lock`."""
    m = _mark(conn)
    sql = (
        f"SELECT (SELECT count(*) FROM batches WHERE batch_id = {m}), h.chain_index, h.digest,"
        f" (SELECT key_id FROM chain_keys WHERE collector = {m}),"
        f" (SELECT public_key FROM signing_keys WHERE collector = {m})"
        " FROM (SELECT 1 AS one) AS one LEFT JOIN (SELECT chain_index, digest FROM batches"
        f" WHERE collector = {m} AND chain_index IS NOT NULL ORDER BY chain_index DESC LIMIT 1) AS h"
        " ON 1 = 1"
    )
    known, index, digest, mac_key, signing_key = query(conn, sql, (batch, collector, collector, collector))[0]
    if known:
        return None
    if index is None:
        return ChainHead(0, genesis(collector, legacy_batches(conn, collector)), mac_key, signing_key)
    return ChainHead(int(index), str(digest), mac_key, signing_key)


def stored_rows(conn: Connection, ids: Sequence[str], columns: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """The stored rows of `ids` (those that exist), as tuples of `columns`, by event_id."""
    found: dict[str, tuple[Any, ...]] = {}
    names = ", ".join(["event_id", *columns])
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ", ".join(_mark(conn) for _ in chunk)
        sql = f"SELECT {names} FROM events WHERE event_id IN ({marks})"
        for r in conn.exec_driver_sql(sql, tuple(chunk)):
            found[r[0]] = tuple(r[1:])
    return found


def link(
    conn: Connection,
    collector: str,
    position: int,
    batch: str,
    committed: str,
    rows: Sequence[Sequence[Any]],
    *,
    leaves: Sequence[bytes] | None = None,
    key: bytes | None = None,
    signer: signing.Signer | None = None,
    register: Callable[[Connection, signing.Signer, int, str], None],
) -> Link | None:
    """Chain a batch whose newly inserted rows (sorted by event_id) are `rows`; None when this very
    batch was committed before (a re-delivery adds no row and no link). The caller holds `lock`;
    `leaves` are the rows' `written_leaves` when it already hashed them (while the rows were sent).

    With the collector's `signer` the batch's digest is signed (`storage.chain.signing`), and its
    first signed batch registers its public key under the root (`storage.chain.registry`); with a
    MAC `key` the digest is keyed as before signatures. A collector that registered a key cannot
    write without it, nor with another. `register` is `storage.chain.registry.register`, passed in
    because the registry reads the chain through this module."""
    now = chain_head(conn, collector, batch)
    if now is None:
        return None
    if signer is not None:
        if now.signing_key is None:
            register(conn, signer, now.index + 1, committed)
        elif now.signing_key != signer.public:
            raise StorageError(
                f"the signing key held for collector {collector} ({signing.short(signer.public)}) is not the"
                f" one the Ledger registered ({signing.short(now.signing_key)}): restore"
                " FLIGHTLOG_HOME/chain-keys from where it ran before"
            )
    elif now.signing_key is not None:
        raise StorageError(
            f"collector {collector} signs its batches: it cannot write without its signing key"
        )
    else:
        chain_seal.check_key(collector, now.mac_key, key)
        if key is not None and now.mac_key is None:
            chain_seal.register(conn, collector, key, now.index + 1, committed)
    if leaves is None:
        leaves = written_leaves(rows)
    index = now.index + 1
    head = header(
        collector, index, position, batch, committed, COLUMNS, len(rows),
        keyed=key is not None, signed=signer is not None,
    )  # fmt: skip
    digest_now = digest(now.digest, head, leaves, None if signer is not None else key)
    return Link(
        index=index,
        digest=digest_now,
        event_ids=json.dumps([r[0] for r in rows], ensure_ascii=False),
        event_leaves=b"".join([leaf[: LEAF_HEX // 2] for leaf in leaves]).hex(),
        event_columns=",".join(COLUMNS),
        signature=signer.sign_head(digest_now) if signer is not None else None,
    )
