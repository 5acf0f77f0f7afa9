"""One batch, one transaction: blobs, new events (sorted), the chained batch row, position.

The event insert bypasses the ORM. Once a collector's batches come back wholly new, SQLite takes a
prepared `executemany` of the batch and PostgreSQL COPYs it straight into `events` (hashing its chain
leaves while the server inserts them). When one is refused (a re-delivery, an overlap, another
writer's commit: a primary key, or SQLite's BEFORE INSERT trigger that refuses a known id from any
connection and fires before an ON CONFLICT clause is considered), the batch runs again the careful
way: SQLite offers only the ids it found absent, PostgreSQL goes through a temporary table and one
`INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING event_id` (reference/storage.md: ~96k
rows/s, against ~6.5k through the ORM). The rows that were new are chained into the batch row
(storage.chain.links). The columns are the ones `storage.schema` defines.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage.chain import links as chain
from storage.chain import registry
from storage.chain.signing import Signer
from storage.events import AppendResult, Batch, Conflict
from storage.rows import COLUMNS, content_fingerprint
from storage.schema import EventRow
from storage.sqlite_setup import sqlite_time

PG_TYPES: Final = (
    "text", "text", "text", "int8", "timestamptz", "text", "text", "text", "text", "text", "int4",
    "text", "text", "text", "text", "text", "text", "int8", "int8", "float8", "bytea", "text", "text",
    "int8", "bool", "text", "text", "text", "bool", "float8", "float8", "float8", "int8", "float8",
    "int8", "int8", "int8", "int8",
)  # fmt: skip


@functools.cache
def pg_type_oids() -> tuple[int, ...]:
    """`PG_TYPES` as OIDs, looked up once: `Copy.set_types` given names looks each one up in the
    adapters' registry at every COPY (measured: ~9% of a one-request commit's CPU)."""
    from psycopg.postgres import types

    return tuple(types[name].oid for name in PG_TYPES)


_COLS: Final = ", ".join(COLUMNS)
_MARKS: Final = ", ".join("?" for _ in COLUMNS)
SQLITE_INSERT: Final = f"INSERT INTO events ({_COLS}) VALUES ({_MARKS})"
"""Only ids not yet stored are offered: SQLite fires the BEFORE INSERT trigger that refuses a known
event_id (append-only from any connection, see migration 0004) before any ON CONFLICT clause."""
PG_STAGE: Final = (
    "CREATE TEMP TABLE IF NOT EXISTS events_incoming (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
)
COPY_FORMAT: Final = "BINARY"
"""The COPY's format. The server buffers a COPY's rows and inserts them (heap and indexes) in groups
of 1,000 rows or 64 KiB of input lines, but binary input has no lines: a batch of up to 1,000 rows
is inserted only once its COPY has ended, while the client waits. Text format lets the server insert
as rows arrive (a little less wall time per batch) but costs more client CPU a row and the server no
less: more CPU in all, which a machine busy proxying has less of than time to wait (bench.ledger)."""
PG_MOVE: Final = (
    f"INSERT INTO events ({_COLS}) SELECT {_COLS} FROM events_incoming ORDER BY event_id"
    " ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
)


def _hasher() -> ThreadPoolExecutor:
    """The thread that hashes a PostgreSQL batch's chain leaves while the server inserts its rows.

    The server inserts a COPY's rows only once it has ended (`COPY_FORMAT`), and the client then
    waits on its socket with the interpreter lock released: the leaves' JSON and SHA-256 (about a
    third of the client's CPU a row) are hashed in that wait instead of before or after it, which
    raises the events a second a PostgreSQL Ledger takes by about a quarter (bench.ledger).
    One thread a process, made on first use, never at import; a forked child makes its own (the
    parent's thread does not exist there, and work queued for it would never run).
    """
    return _hasher_of(os.getpid())


HASH_APART_MIN: Final = 16
"""Rows from which a PostgreSQL batch's leaves are hashed on `_hasher`'s thread. Handing work to a
thread and back costs more CPU than hashing a few rows inline, more than the hashing it overlaps
with the server's insert for a small batch: the small batches of an agent's pace hash inline."""


def hash_apart(rows: int) -> bool:
    """Whether a COPY of `rows` new events hashes their leaves on the thread (`HASH_APART_MIN`)."""
    return rows >= HASH_APART_MIN


@functools.cache
def _hasher_of(pid: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"flightlog-leaves-{pid}")


@dataclass(frozen=True, slots=True)
class BlobRecord:
    """A blob row ready to insert: `frame` is the zstd frame when inline, None when in the store."""

    sha256: str
    size: int
    stored_size: int
    location: str
    frame: bytes | None


def batch_id(batch: Batch) -> str:
    """A stable id for a batch: the same delivery, re-sent, is the same batch."""
    ids = sorted([e.event_id for e in batch.events])
    ids.insert(0, f"{batch.collector}\x00{batch.position}")  # each id behind a NUL: one string hashed
    return hashlib.sha256("\x00".join(ids).encode()).hexdigest()[:32]


def _known(conn: Connection, table: str, key: str, keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    marks = "?" if conn.dialect.name == "sqlite" else "%s"
    for i in range(0, len(keys), 500):
        chunk = list(keys[i : i + 500])
        sql = f"SELECT {key} FROM {table} WHERE {key} IN ({', '.join(marks for _ in chunk)})"
        found.update(r[0] for r in chain.query(conn, sql, chunk))
    return found


def known_blobs(conn: Connection, shas: Sequence[str]) -> set[str]:
    """Which of `shas` are already stored (so their bytes need not be compressed again)."""
    return _known(conn, "blobs", "sha256", shas)


def _insert_blobs(conn: Connection, blobs: Sequence[BlobRecord], now: datetime) -> None:
    sqlite = conn.dialect.name == "sqlite"
    if sqlite and blobs:  # another writer may have stored one since; SQLite refuses a known address
        present = known_blobs(conn, [b.sha256 for b in blobs])
        blobs = [b for b in blobs if b.sha256 not in present]
    if not blobs:
        return
    mark = "?" if sqlite else "%s"
    conflict = "" if sqlite else " ON CONFLICT (sha256) DO NOTHING"
    sql = (
        "INSERT INTO blobs (sha256, size, stored_size, location, codec, data, created_at) "
        f"VALUES ({', '.join(mark for _ in range(7))}){conflict}"
    )
    stamp: Any = sqlite_time(now) if sqlite else now
    rows = [(b.sha256, b.size, b.stored_size, b.location, "zstd", b.frame, stamp) for b in blobs]
    with chain.DriverCursor(conn) as cursor:
        cursor.executemany(sql, rows)


def _fresh(rows: Sequence[tuple[Any, ...]], known: set[str]) -> list[tuple[Any, ...]]:
    """The rows whose ids are not in `known`: the first of any id repeated in the batch."""
    fresh = []
    for r in rows:
        if r[0] not in known:
            known.add(r[0])
            fresh.append(r)
    return fresh


def _insert_events_sqlite(
    conn: Connection, rows: Sequence[tuple[Any, ...]], staged: bool
) -> list[tuple[Any, ...]]:
    """Insert the rows (their time already SQLite text) whose ids are not stored yet; give them back.

    `staged` (a collector not known caught up: `Ledger._append_once`): only ids checked absent in
    this same write transaction are offered, so the refuse-a-known-id trigger cannot fire. Else
    every row is offered without the lookup (in the steady state none is stored: a query a batch
    spared inside the write lock), and a stored one makes the insert fail, on the
    primary key: the caller runs the batch again `staged`. The refuse-a-known-id trigger is off
    for this one statement (on this connection only; every other connection and statement keeps
    it): this plain INSERT cannot replace a row, and the trigger's cost a row halved the event rows'
    ingest (bench.ledger)."""
    known = _known(conn, "events", "event_id", [r[0] for r in rows]) if staged else set()
    fresh = _fresh(rows, known)
    with chain.DriverCursor(conn) as cursor:
        raw = cursor.connection
        raw.setconfig(sqlite3.SQLITE_DBCONFIG_ENABLE_TRIGGER, False)
        try:
            cursor.executemany(SQLITE_INSERT, fresh)
        finally:
            raw.setconfig(sqlite3.SQLITE_DBCONFIG_ENABLE_TRIGGER, True)
    return fresh


def _insert_events_pg(
    conn: Connection, rows: Sequence[tuple[Any, ...]], staged: bool
) -> tuple[list[tuple[Any, ...]], list[bytes] | None]:
    """Insert the rows; give back the ones that were new (sorted by event_id, like `rows`) and,
    when the direct path hashed them on `_hasher`'s thread (`hash_apart`), their chain leaves.

    Direct (the steady state, once the Ledger has seen a collector's batch come back wholly new:
    `Ledger._append_once`): the rows are COPYed straight into `events`, no lookup first; the
    leaves of a batch of `HASH_APART_MIN` rows or more are hashed on `_hasher`'s thread while the
    server inserts them (it inserts a batch of up to 1,000 rows once the COPY ends:
    `COPY_FORMAT`); a smaller batch's are left to `chain.link`. `staged` (a collector
    still catching up after a start, which re-delivers) goes through the temporary table and
    `ON CONFLICT DO NOTHING`; an id stored meanwhile by another writer makes the direct COPY fail
    on the primary key (`UniqueViolation`), and the caller runs the batch again `staged`.
    """
    with chain.DriverCursor(conn) as cur:
        if staged:
            cur.execute(PG_STAGE)
            with cur.copy(f"COPY events_incoming ({_COLS}) FROM STDIN (FORMAT {COPY_FORMAT})") as copy:
                copy.set_types(pg_type_oids())
                for row in rows:
                    copy.write_row(row)
            cur.execute(PG_MOVE)
            inserted = {r[0] for r in cur.fetchall()}
            return _fresh(rows, {r[0] for r in rows} - inserted), None
        fresh = _fresh(rows, set())  # an id stored before makes the COPY fail: the staged path
        with cur.copy(f"COPY events ({_COLS}) FROM STDIN (FORMAT {COPY_FORMAT})") as copy:
            copy.set_types(pg_type_oids())
            write = copy.write_row
            for row in fresh:
                write(row)
            hashing = _hasher().submit(chain.written_leaves, fresh) if hash_apart(len(fresh)) else None
        # leaving the block ended the COPY and waited for the server's insert
    return fresh, None if hashing is None else hashing.result()


def _stored_fingerprints(conn: Connection, ids: Sequence[str]) -> dict[str, str]:
    """Content fingerprints of the stored versions of `ids` (only asked when some were not new)."""
    from sqlalchemy import select

    table = EventRow.__table__  # type: ignore[attr-defined]
    found: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        query = select(table).where(table.c.event_id.in_(list(ids[i : i + 500])))
        found.update((r["event_id"], content_fingerprint(dict(r))) for r in conn.execute(query).mappings())
    return found


BATCH_COLUMNS: Final = (
    "batch_id, collector, position, received, new, duplicates, conflicts, raw_bytes, stored_bytes,"
    " committed_at, chain_index, digest, event_ids, event_leaves, event_columns, signature"
)
POSITION: Final = (
    "INSERT INTO positions (collector, position, updated_at) VALUES ({m}, {m}, {m})"
    " ON CONFLICT (collector) DO UPDATE SET position = excluded.position,"
    " updated_at = excluded.updated_at WHERE excluded.position > positions.position"
)


def _record_batch(
    conn: Connection,
    batch: Batch,
    result: AppendResult,
    raw_bytes: int,
    stored_bytes: int,
    now: datetime,
    link: chain.Link | None,
) -> None:
    """The batch row (with its chain link) and the collector's position; a re-delivered batch
    (its row already there) only moves the position. On PostgreSQL both in one statement (a
    data-modifying CTE): one round trip less per batch, on the commit path."""
    sqlite = conn.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    stamp: Any = sqlite_time(now) if sqlite else now
    position = POSITION.format(m=mark)
    where = (batch.collector, batch.position, stamp)
    if link is None:
        chain.query(conn, position, where)
        return
    conflicts = json.dumps([c.event_id for c in result.conflicts])
    values = (
        result.batch_id, batch.collector, batch.position, result.received, result.new, result.duplicates,
        conflicts, raw_bytes, stored_bytes, stamp, link.index, link.digest, link.event_ids,
        link.event_leaves, link.event_columns, link.signature,
    )  # fmt: skip
    insert = f"INSERT INTO batches ({BATCH_COLUMNS}) VALUES ({', '.join(mark for _ in values)})"
    if sqlite:
        chain.query(conn, insert, values)
        chain.query(conn, position, where)
    else:
        chain.query(
            conn, f"WITH b AS ({insert} ON CONFLICT (batch_id) DO NOTHING) {position}", values + where
        )


def write_batch(
    conn: Connection,
    batch: Batch,
    rows: Sequence[tuple[Any, ...]],
    blobs: Sequence[BlobRecord],
    raw_bytes: int,
    *,
    staged: bool,
    leaves: Sequence[bytes] | None = None,
    key: bytes | None = None,
    signer: Signer | None = None,
    also: Callable[[Connection], None] | None = None,
) -> AppendResult:
    """Inside the caller's transaction: write everything of one batch and account for it.

    `rows` are sorted by event_id (the order they are inserted and chained in). The collector's
    chain lock comes first (storage.chain.links.lock), so two writers of one collector
    queue before either inserts a row: neither waits on the other's rows while holding the lock.
    On SQLite `rows` carry their time as text (`to_row(..., text_time=True)`), and `leaves` may be
    their `chain.written_leaves` (in `rows`' order), hashed before the transaction began: SQLite's
    write lock is one for the whole database, and every millisecond of CPU spent holding it is one
    the other writers wait. `staged` asks first which events are stored and offers only the others
    (a collector catching up after a start; see `_insert_events_sqlite`, `_insert_events_pg`).
    `signer` signs the batch's chain head (`storage.chain.signing`); without one, `key` (a MAC chain
    key, `storage.chain.keys`) keys its digest as before signatures. `also` writes what must commit
    with the batch and nowhere else (a pruning's marks, `storage.retention.prune`).
    """
    now = datetime.now(UTC)
    chain.lock(conn, batch.collector)
    _insert_blobs(conn, blobs, now)
    fresh_leaves: Sequence[bytes] | None = None  # chain.link hashes what was not hashed already
    if conn.dialect.name == "sqlite":
        fresh = _insert_events_sqlite(conn, rows, staged)
        if leaves is not None and len(fresh) == len(rows):
            fresh_leaves = leaves  # every row was new: the same rows, in the same order
        elif leaves is not None:
            of_row = {id(r): leaf for r, leaf in zip(rows, leaves, strict=True)}
            fresh_leaves = [of_row[id(r)] for r in fresh]
    else:
        fresh, fresh_leaves = _insert_events_pg(conn, rows, staged)
    new = len(fresh)
    conflicts: list[Conflict] = []
    if new < len(rows):
        stored = _stored_fingerprints(conn, [r[0] for r in rows])
        offered = {r[0]: content_fingerprint(dict(zip(COLUMNS, r, strict=True))) for r in rows}
        conflicts = [
            Conflict(event_id=i, stored_fingerprint=stored[i], offered_fingerprint=offered[i])
            for i in sorted(offered)
            if i in stored and stored[i] != offered[i]
        ]
    result = AppendResult(
        batch_id=batch_id(batch),
        received=len(rows),
        new=new,
        duplicates=len(rows) - new - len(conflicts),
        conflicts=tuple(conflicts),
    )
    link = chain.link(
        conn,
        batch.collector,
        batch.position,
        result.batch_id,
        sqlite_time(now),
        fresh,
        leaves=fresh_leaves,
        key=key,
        signer=signer,
        register=registry.register,
    )
    if also is not None:
        also(conn)
    _record_batch(conn, batch, result, raw_bytes, sum(b.stored_size for b in blobs), now, link)
    return result
