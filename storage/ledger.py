"""The Ledger as a whole: open it by URL, append batches, read events and payloads.

`open_ledger(url, blobs_url)` creates or migrates the schema and returns a `Ledger`; nothing is
created at import time. One `Ledger` may be shared by threads (SQLAlchemy's pool underneath).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy.engine import Engine

from storage.events import AppendResult, Batch, PayloadRef, StoredEvent


class Spool:
    """Accepts a payload chunk by chunk with bounded memory; `close()` stores it and gives its address.

    Small payloads stay in memory and come back as `bytes` (to travel inline on an `Event`); past
    `INLINE_MAX` they spill to a temporary file, are hashed as they arrive, uploaded to the blob
    store on close, and come back as a `PayloadRef`.
    """

    def write(self, chunk: bytes) -> None:
        raise NotImplementedError

    def close(self) -> bytes | PayloadRef:
        raise NotImplementedError

    def discard(self) -> None:
        raise NotImplementedError


class Ledger:
    """An open Ledger: its engine, its blob store, and the verbs that use them."""

    engine: Engine
    url: str

    def append(self, batch: Batch) -> AppendResult:
        """Commit one batch (blobs, events, batch row, position) in one transaction."""
        raise NotImplementedError

    def event(self, event_id: str) -> StoredEvent | None:
        """One event whole, or None."""
        raise NotImplementedError

    def action(self, action_id: str) -> list[StoredEvent]:
        """Every event of one action, in (at, seq, event_id) order."""
        raise NotImplementedError

    def payload(self, sha256: str) -> bytes:
        """A payload's exact bytes, re-hashed; raises `CorruptPayload`/`MissingPayload` otherwise."""
        raise NotImplementedError

    def spool(self) -> Spool:
        """A new `Spool` writing into this Ledger's blob store."""
        raise NotImplementedError

    def position(self, collector: str) -> int | None:
        """The last delivered position of a collector."""
        raise NotImplementedError

    def events(self, event_ids: Sequence[str]) -> Iterator[StoredEvent]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def open_ledger(url: str, blobs_url: str | None = None) -> Ledger:
    """Open (creating or migrating) the Ledger at `url`, with its blob store at `blobs_url`."""
    raise NotImplementedError
