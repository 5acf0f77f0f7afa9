"""One batch, one transaction: blobs, events (ON CONFLICT DO NOTHING, sorted), batch row, position.

The event insert bypasses the ORM: SQLite takes a prepared `executemany`; PostgreSQL COPYs the
batch into a per-connection temporary table and moves it with one `INSERT ... SELECT ... ON
CONFLICT DO NOTHING` (reference/storage.md: ~96k rows/s, against ~6.5k through the ORM). The
columns are the ones `storage.schema` defines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage.events import AppendResult, Batch, Conflict
from storage.rows import COLUMNS, content_fingerprint
from storage.schema import EventRow

PG_TYPES: Final = (
    "text", "text", "text", "int8", "timestamptz", "text", "text", "text", "text", "text", "int4",
    "text", "text", "text", "text", "text", "text", "int8", "int8", "float8", "bytea", "text", "text",
    "int8", "bool", "text", "text", "text",
)  # fmt: skip
_COLS: Final = ", ".join(COLUMNS)
_MARKS: Final = ", ".join("?" for _ in COLUMNS)
SQLITE_INSERT: Final = f"INSERT INTO events ({_COLS}) VALUES ({_MARKS}) ON CONFLICT (event_id) DO NOTHING"
PG_STAGE: Final = (
    "CREATE TEMP TABLE IF NOT EXISTS events_incoming (LIKE events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
)
PG_MOVE: Final = (
    f"INSERT INTO events ({_COLS}) SELECT {_COLS} FROM events_incoming ORDER BY event_id"
    " ON CONFLICT (event_id) DO NOTHING"
)


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
    h = hashlib.sha256(f"{batch.collector}\x00{batch.position}".encode())
    for event_id in sorted(e.event_id for e in batch.events):
        h.update(b"\x00" + event_id.encode())
    return h.hexdigest()[:32]


def sqlite_time(at: datetime) -> str:
    """SQLAlchemy's own SQLite datetime text form (`at` is aware UTC), so ORM and raw reads agree."""
    return at.replace(tzinfo=None).isoformat(" ", "microseconds")


def known_blobs(conn: Connection, shas: Sequence[str]) -> set[str]:
    """Which of `shas` are already stored (so their bytes need not be compressed again)."""
    found: set[str] = set()
    marks = "?" if conn.dialect.name == "sqlite" else "%s"
    for i in range(0, len(shas), 500):
        chunk = list(shas[i : i + 500])
        sql = f"SELECT sha256 FROM blobs WHERE sha256 IN ({', '.join(marks for _ in chunk)})"
        found.update(r[0] for r in conn.exec_driver_sql(sql, tuple(chunk)))
    return found


def _insert_blobs(conn: Connection, blobs: Sequence[BlobRecord], now: datetime) -> None:
    if not blobs:
        return
    sqlite = conn.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    sql = (
        "INSERT INTO blobs (sha256, size, stored_size, location, codec, data, created_at) "
        f"VALUES ({', '.join(mark for _ in range(7))}) ON CONFLICT (sha256) DO NOTHING"
    )
    stamp: Any = sqlite_time(now) if sqlite else now
    rows = [(b.sha256, b.size, b.stored_size, b.location, "zstd", b.frame, stamp) for b in blobs]
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(sql, rows)


def _insert_events_sqlite(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
    prepared = [(*r[:4], sqlite_time(r[4]), *r[5:]) for r in rows]
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(SQLITE_INSERT, prepared)
    return int(cursor.rowcount)


def _insert_events_pg(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
    raw = conn.connection.driver_connection
    with raw.cursor() as cur:  # type: ignore[union-attr]
        cur.execute(PG_STAGE)
        with cur.copy(f"COPY events_incoming ({_COLS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(PG_TYPES))
            for row in rows:
                copy.write_row(row)
        cur.execute(PG_MOVE)
        return int(cur.rowcount)


def _stored_fingerprints(conn: Connection, ids: Sequence[str]) -> dict[str, str]:
    """Content fingerprints of the stored versions of `ids` (only asked when some were not new)."""
    from sqlalchemy import select

    table = EventRow.__table__  # type: ignore[attr-defined]
    found: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        query = select(table).where(table.c.event_id.in_(list(ids[i : i + 500])))
        found.update((r["event_id"], content_fingerprint(dict(r))) for r in conn.execute(query).mappings())
    return found


def _record_batch(
    conn: Connection, batch: Batch, result: AppendResult, raw_bytes: int, stored_bytes: int, now: datetime
) -> None:
    sqlite = conn.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    stamp: Any = sqlite_time(now) if sqlite else now
    conflicts = json.dumps([c.event_id for c in result.conflicts])
    conn.exec_driver_sql(
        "INSERT INTO batches (batch_id, collector, position, received, new, duplicates, conflicts,"
        f" raw_bytes, stored_bytes, committed_at) VALUES ({', '.join(mark for _ in range(10))})"
        " ON CONFLICT (batch_id) DO NOTHING",
        (
            result.batch_id,
            batch.collector,
            batch.position,
            result.received,
            result.new,
            result.duplicates,
            conflicts,
            raw_bytes,
            stored_bytes,
            stamp,
        ),
    )
    conn.exec_driver_sql(
        f"INSERT INTO positions (collector, position, updated_at) VALUES ({mark}, {mark}, {mark})"
        " ON CONFLICT (collector) DO UPDATE SET position = excluded.position,"
        " updated_at = excluded.updated_at WHERE excluded.position > positions.position",
        (batch.collector, batch.position, stamp),
    )


def write_batch(
    conn: Connection,
    batch: Batch,
    rows: Sequence[tuple[Any, ...]],
    blobs: Sequence[BlobRecord],
    raw_bytes: int,
) -> AppendResult:
    """Inside the caller's transaction: write everything of one batch and account for it."""
    now = datetime.now(UTC)
    _insert_blobs(conn, blobs, now)
    ordered = sorted(rows, key=lambda r: r[0])
    if conn.dialect.name == "sqlite":
        new = _insert_events_sqlite(conn, ordered)
    else:
        new = _insert_events_pg(conn, ordered)
    conflicts: list[Conflict] = []
    if new < len(ordered):
        stored = _stored_fingerprints(conn, [r[0] for r in ordered])
        offered = {r[0]: content_fingerprint(dict(zip(COLUMNS, r, strict=True))) for r in ordered}
        conflicts = [
            Conflict(event_id=i, stored_fingerprint=stored[i], offered_fingerprint=offered[i])
            for i in sorted(offered)
            if i in stored and stored[i] != offered[i]
        ]
    result = AppendResult(
        batch_id=batch_id(batch),
        received=len(ordered),
        new=new,
        duplicates=len(ordered) - new - len(conflicts),
        conflicts=tuple(conflicts),
    )
    _record_batch(conn, batch, result, raw_bytes, sum(b.stored_size for b in blobs), now)
    return result
