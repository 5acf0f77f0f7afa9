"""The Ledger as a whole: open it by URL, append batches, read events and payloads.

`open_ledger(url, blobs_url)` creates or migrates the schema and returns a `Ledger`; nothing is
created at import time. One `Ledger` may be shared by threads (SQLAlchemy's pool underneath).

Writes retry where retrying is safe: a batch is idempotent (stable event ids, ON CONFLICT DO
NOTHING, a deterministic batch id), so after a lost connection the same batch is simply sent again.
"""

from __future__ import annotations

import functools
import io
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from storage import codec, event_reads
from storage.append import BlobRecord, known_blobs, write_batch
from storage.blobstore import BlobStore, open_blob_store
from storage.chain import links as chain
from storage.chain.signing import Keys, LedgerKeys, Signer
from storage.engine import WRITE, make_engine
from storage.errors import (
    BadLedgerUrl,
    BlobStoreUnavailable,
    LedgerUnavailable,
    MissingPayload,
    PrunedPayload,
    StorageError,
    from_library,
)
from storage.events import INLINE_MAX, AppendResult, Batch, Event, PayloadRef, StoredEvent
from storage.locations import flightlog_home
from storage.migrate import migrate
from storage.rows import Address, from_mapping, payload_address, to_row, validate
from storage.schema import BlobRow, EventRow, PrunedRow
from storage.spool import Spool
from storage.wal_checkpoints import Checkpointer, backstop

log = logging.getLogger("flightlog.storage")
T = TypeVar("T")
EVENTS = EventRow.__table__  # type: ignore[attr-defined]
BLOBS = BlobRow.__table__  # type: ignore[attr-defined]
PRUNED = PrunedRow.__table__  # type: ignore[attr-defined]


def translate(e: BaseException, url: str) -> StorageError:
    """The Ledger's error for a library error (by type, `storage.errors.from_library`); an error
    that table does not know is re-raised as it is, never reported as an outage."""
    mapped = from_library(e, url)
    if mapped is None:
        raise e
    return mapped


class Prepared(NamedTuple):
    """A batch made ready for its transaction, before any attempt (`Ledger.append`)."""

    batch: Batch
    rows: list[tuple[object, ...]]
    unique: dict[str, bytes]
    """Distinct payload bytes by address."""
    refs: dict[str, PayloadRef]
    """Payloads already spooled into the blob store, by address."""
    raw_bytes: int
    leaves: list[bytes] | None
    """SQLite: the rows' chain leaves, hashed before the write lock is taken."""
    key: bytes | None  # a MAC chain key (`storage.chain.keys`): a Ledger written as before signatures
    signer: Signer | None  # the collector's signing key (`storage.chain.signing`), made on its first batch
    also: Callable[[Connection], None] | None = None
    """What commits with the batch and nowhere else (`storage.retention.prune`'s marks)."""


def _raced(e: BaseException) -> bool:
    """The direct insert met an event id already stored (a re-delivery, another writer's commit
    after this one looked): PostgreSQL's primary key refused the COPY, or SQLite's refuse-a-known-id
    trigger or primary key refused the insert. The batch is run again on the careful path."""
    error = e.orig if isinstance(e, DBAPIError) else e
    if isinstance(error, sqlite3.IntegrityError):
        said = str(error)
        return "events.event_id" in said or "recorded event_id" in said
    diag = getattr(error, "diag", None)
    return getattr(error, "sqlstate", None) == "23505" and getattr(diag, "table_name", None) == "events"


def _retryable(e: StorageError) -> bool:
    """A lost connection, a lock wait, a deadlock, an unreachable blob store: the same batch can be
    sent again safely (it is idempotent). A full disk is not retried here (it lasts; the writer
    waits it out), nor is anything the database refused."""
    return isinstance(e, LedgerUnavailable | BlobStoreUnavailable)


class Ledger:
    """An open Ledger: its engine, its blob store, and the verbs that use them."""

    def __init__(
        self, engine: Engine, url: str, blobs: BlobStore, retry_seconds: float = 30.0, keys: Keys = None
    ) -> None:
        self.engine = engine
        self.keys = keys  # the collectors' chain keys (`storage.chain.keys`); None: unkeyed chains
        self.url = url
        self.blobs = blobs
        self.retry_seconds = retry_seconds
        self._caught_up: set[str] = set()
        """Collectors whose last batch here was wholly new, so their next batch's events are
        inserted without asking first which are stored (`_append_once`)."""
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._checkpoints = Checkpointer(database) if database and database != ":memory:" else None
        """SQLite: WAL copied back on a thread, not in the commit filling it (`storage.wal_checkpoints`)."""

    # -- writing ---------------------------------------------------------------------------

    def append(self, batch: Batch, also: Callable[[Connection], None] | None = None) -> AppendResult:
        """Commit one batch (blobs, events, batch row, position) in one transaction.

        Large payloads are uploaded first; only then does the transaction that references them
        begin. A lost connection, a deadlock or an unreachable blob store is retried for
        `retry_seconds`, then reported as `LedgerUnavailable`/`BlobStoreUnavailable`.
        """
        for event in batch.events:
            validate(event)
        addresses, unique = self._address(batch.events)
        sqlite = self.engine.dialect.name == "sqlite"
        rows = [to_row(e, payload_address(e, addresses), text_time=sqlite) for e in batch.events]
        rows.sort(key=itemgetter(0))  # by event_id, as they are inserted and chained
        # SQLite: the chain's leaves are hashed now, before the write lock (one for the database) is held.
        leaves = chain.written_leaves(rows) if sqlite else None
        raw_bytes = sum(len(e.payload) for e in batch.events if isinstance(e.payload, bytes))
        refs = {e.payload.sha256: e.payload for e in batch.events if isinstance(e.payload, PayloadRef)}
        key, signer = None, None
        if isinstance(self.keys, LedgerKeys):
            signer = self.keys.signer(batch.collector)
        elif self.keys is not None:
            key = self.keys.key_for(batch.collector)
        ready = Prepared(batch, rows, unique, refs, raw_bytes, leaves, key, signer, also)
        return self._retry(lambda: self._append_once(ready))

    def _address(self, events: Sequence[Event]) -> tuple[dict[int, Address], dict[str, bytes]]:
        """Hash each distinct payload once: id(bytes) -> address, and sha -> bytes."""
        addresses: dict[int, Address] = {}
        unique: dict[str, bytes] = {}
        for event in events:
            data = event.payload
            if isinstance(data, bytes) and id(data) not in addresses:
                sha = codec.sha256_hex(data)
                addresses[id(data)] = (sha, len(data), codec.is_text(data))
                unique.setdefault(sha, data)
        return addresses, unique

    def _append_once(self, ready: Prepared) -> AppendResult:
        """One attempt at the batch's transaction.

        A collector's batches go the careful way (`staged`: ask which events are stored, offer only
        the others) until one comes back wholly new, and straight in from then on: SQLite inserts
        them without the lookup, PostgreSQL COPYs them into `events`. A writer started again
        re-delivers what its predecessor committed, often over several batches: offered straight,
        each would be refused (a primary key, SQLite's refuse-a-known-id trigger) and rolled back,
        and on PostgreSQL leave an ERROR line in the server's log. A batch that fails (a lost
        connection: its commit may have landed) makes the retry careful too; one refused because
        an id was stored meanwhile (`_raced`) is run again at once the careful way.
        """
        attempt = self._append_sqlite if self.engine.dialect.name == "sqlite" else self._append_pg
        collector = ready.batch.collector
        staged = collector not in self._caught_up
        self._caught_up.discard(collector)  # until this batch is known wholly new
        try:
            result = attempt(ready, staged=staged)
        except Exception as e:  # the insert runs on the driver's cursor: its error, unwrapped
            if staged or not _raced(e):
                raise
            result = attempt(ready, staged=True)
        if result.new == result.received:
            self._caught_up.add(collector)
        return result

    def _append_sqlite(self, ready: Prepared, *, staged: bool) -> AppendResult:
        """Which blobs are stored is read, and the new ones compressed, before BEGIN IMMEDIATE takes
        the database's one write lock; on the same pooled connection as the write (a second checkout
        and its return would cost a share of a one-request commit's CPU)."""
        with self.engine.connect() as conn:
            blobs = self._blobs(conn, ready)
            if self._checkpoints is not None:
                backstop(conn.connection.info, conn.connection.driver_connection)
            with conn.execution_options(**WRITE).begin():
                write = functools.partial(
                    write_batch,
                    staged=staged,
                    leaves=ready.leaves,
                    key=ready.key,
                    signer=ready.signer,
                    also=ready.also,
                )
                result = write(conn, ready.batch, ready.rows, blobs, ready.raw_bytes)
        if self._checkpoints is not None:
            self._checkpoints.committed(result.new)
        return result

    def _append_pg(self, ready: Prepared, *, staged: bool) -> AppendResult:
        """One connection and one transaction for the whole batch (a pool checkout and its ping cost
        a round trip each): which blobs are stored, compress the new ones, write. (`leaves` is
        None: PostgreSQL hashes them while the server inserts the rows.)"""
        with self.engine.connect() as conn, conn.begin():
            blobs = self._blobs(conn, ready)
            return write_batch(
                conn,
                ready.batch,
                ready.rows,
                blobs,
                ready.raw_bytes,
                staged=staged,
                key=ready.key,
                signer=ready.signer,
                also=ready.also,
            )

    def _blobs(self, conn: Connection, ready: Prepared) -> list[BlobRecord]:
        """The blob rows a batch adds: its new payloads packed, and its spooled refs not yet stored."""
        unique, refs = ready.unique, ready.refs
        present = known_blobs(conn, [*unique, *refs]) if (unique or refs) else set()
        blobs = self._pack([(s, d) for s, d in unique.items() if s not in present])
        blobs += [
            BlobRecord(r.sha256, r.size, r.stored_size, "store", None)
            for s, r in refs.items()
            if s not in present
        ]
        return blobs

    def _pack(self, payloads: list[tuple[str, bytes]]) -> list[BlobRecord]:
        """Compress new payloads; upload the large ones before any transaction refers to them."""
        records = []
        for sha, data in payloads:
            frame = codec.compress(data)
            if len(data) > INLINE_MAX:
                self.blobs.put(sha, frame)
                records.append(BlobRecord(sha, len(data), len(frame), "store", None))
            else:
                records.append(BlobRecord(sha, len(data), len(frame), "inline", frame))
        return records

    def _retry(self, attempt: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.1
        while True:
            try:
                return attempt()
            except Exception as e:
                mapped = from_library(e, self.url)
                if mapped is None:
                    raise  # not a storage condition: a bug, shown as it is
                if not _retryable(mapped) or time.monotonic() + delay > deadline:
                    if mapped is e:
                        raise
                    raise mapped from e
                log.warning("ledger write failed (%s); retrying in %.1fs", str(mapped).splitlines()[0], delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def spool(self, tmpdir: Path | None = None) -> Spool:
        """A new `Spool` writing into this Ledger's blob store."""
        return Spool(self.blobs, tmpdir)

    # -- reading ---------------------------------------------------------------------------

    def _read(self, attempt: Callable[[Connection], T]) -> T:
        try:
            with self.engine.connect() as conn:
                return attempt(conn)
        except StorageError:
            raise
        except Exception as e:
            raise translate(e, self.url) from e

    def event(self, event_id: str) -> StoredEvent | None:
        """One event whole, or None."""
        return event_reads.event(self.engine, event_id)

    def events(self, event_ids: Sequence[str]) -> Iterator[StoredEvent]:
        """The events with these ids (those that exist), in the order asked."""
        ids = list(event_ids)

        def read(c: Connection) -> dict[str, StoredEvent]:
            found: dict[str, StoredEvent] = {}
            for i in range(0, len(ids), 500):
                query = select(EVENTS).where(EVENTS.c.event_id.in_(ids[i : i + 500]))
                found.update((r["event_id"], from_mapping(r)) for r in c.execute(query).mappings())
            return found

        found = self._read(read)
        return (found[i] for i in ids if i in found)

    def action(self, action_id: str) -> list[StoredEvent]:
        """Every event of one action, in (at, seq, event_id) order."""
        return event_reads.action(self.engine, action_id)

    def _frame_row(self, sha: str) -> tuple[str, bytes | None]:
        """A payload's location and inline frame; `MissingPayload` without a blob row,
        `PrunedPayload` for one pruned under a signed record (`storage.retention.prune`)."""
        query = (
            select(BLOBS.c.location, BLOBS.c.data, PRUNED.c.pruned_at, PRUNED.c.reason)
            .select_from(BLOBS.outerjoin(PRUNED, PRUNED.c.sha256 == BLOBS.c.sha256))
            .where(BLOBS.c.sha256 == sha)
        )
        rows = self._read(lambda c: c.execute(query).all())
        if not rows:
            raise MissingPayload(sha)
        location, data, pruned_at, reason = rows[0]
        if pruned_at is not None:
            raise PrunedPayload(sha, str(pruned_at), str(reason))
        return str(location), None if data is None else bytes(data)

    def payload(self, sha256: str) -> bytes:
        """A payload's exact bytes, re-hashed; `CorruptPayload`/`MissingPayload`/`PrunedPayload` otherwise."""
        sha = sha256.lower()
        location, data = self._frame_row(sha)
        frame = data if location == "inline" and data is not None else self.blobs.get(sha)
        return codec.decompress(frame, sha)

    def open_frame(self, sha256: str) -> IO[bytes]:
        """A payload's stored zstd frame as a stream (inline or from the blob store)."""
        sha = sha256.lower()
        location, data = self._frame_row(sha)
        return io.BytesIO(data) if location == "inline" and data is not None else self.blobs.open(sha)

    def payload_chunks(self, sha256: str) -> Iterator[bytes]:
        """A payload's exact bytes in chunks, in bounded memory whatever its size.

        It is decoded and re-hashed once without keeping it, so a payload that does not match its
        address is refused (`CorruptPayload`) before the first chunk; then decoded again as read
        (and re-hashed again: a frame swapped in between still ends in `CorruptPayload`).
        """
        sha = sha256.lower()
        with self.open_frame(sha) as frame:
            codec.check(frame, sha)
        with self.open_frame(sha) as frame:
            yield from codec.stream(frame, sha)

    def position(self, collector: str) -> int | None:
        """The last delivered position of a collector."""

        def read(c: Connection) -> list[tuple[int]]:
            mark = "?" if c.dialect.name == "sqlite" else "%s"
            sql = f"SELECT position FROM positions WHERE collector = {mark}"
            return [tuple(r) for r in c.exec_driver_sql(sql, (collector,))]

        rows = self._read(read)
        return int(rows[0][0]) if rows else None

    def close(self) -> None:
        """Release the database connections (a checkpoint under way finishes first)."""
        if self._checkpoints is not None:
            self._checkpoints.close()
        self.engine.dispose()


def open_ledger(
    url: str, blobs_url: str | None = None, *, retry_seconds: float = 30.0, keys: Keys = None
) -> Ledger:
    """Open (creating or migrating) the Ledger at `url`, with its blob store at `blobs_url`.

    Without `blobs_url`, a SQLite ledger keeps its blobs in a `blobs` folder beside the database
    file; a PostgreSQL ledger needs one named. Batches are signed with `keys` (default: FLIGHTLOG_HOME's).
    """
    engine = make_engine(url)
    if blobs_url is None:
        database = engine.url.database
        if engine.dialect.name != "sqlite" or not database or database == ":memory:":
            raise BadLedgerUrl(f"ledger {url} needs a blob store URL (FLIGHTLOG_BLOBS)")
        blobs_url = (Path(database).expanduser().resolve().parent / "blobs").as_uri()
    try:
        migrate(engine)
    except DBAPIError as e:
        engine.dispose()
        raise translate(e, url) from e
    keys = keys if keys is not None else LedgerKeys(flightlog_home())
    return Ledger(engine, url, open_blob_store(blobs_url), retry_seconds=retry_seconds, keys=keys)
