"""A teed answer body on its way to the Ledger: redacted as it arrives, memory bounded.

Bodies stay in memory up to the Ledger's inline limit and spill to a temporary file past it; the
answer's event carries a small one itself, and a large one is uploaded through `Ledger.spool()` just
before the batch that references it (`Deferred`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from typing import IO, TYPE_CHECKING, Any

from recording import events as ev
from recording.records import ResponseRecord
from storage.events import INLINE_MAX, Event, PayloadRef

if TYPE_CHECKING:
    from storage.ledger import Ledger

USAGE_MAX = 4 * 1024 * 1024
"""Streamed answers up to this size are read back for model and token usage."""


@dataclass
class StreamBody:
    """A teed body being received: redacted as it arrives, kept in memory up to INLINE_MAX, then on disk."""

    file: IO[bytes]
    redactor: Any = None
    size: int = 0
    names: frozenset[str] = frozenset()

    @classmethod
    def spooled(cls, redactor: Any = None) -> StreamBody:
        """A body in memory up to the Ledger's inline limit, on disk past it; `redactor` a
        `StreamRedactor` (or None: nothing to redact)."""
        return cls(file=tempfile.SpooledTemporaryFile(max_size=INLINE_MAX), redactor=redactor)

    def write(self, data: bytes) -> None:
        if self.redactor is not None:
            data = self.redactor.feed(data)
        self.file.write(data)
        self.size += len(data)

    def finish(self) -> None:
        if self.redactor is not None:
            tail = self.redactor.flush()
            self.file.write(tail)
            self.size += len(tail)
            self.names = self.redactor.redacted
        self.file.seek(0)


@dataclass
class Deferred:
    """An event whose large body is uploaded through `Ledger.spool()` just before its batch."""

    event: Event
    body: StreamBody

    def stored(self, ledger: Ledger) -> Event:
        """The event, its body uploaded now (just before the batch that references it)."""
        spool = ledger.spool()
        self.body.file.seek(0)
        while chunk := self.body.file.read(1024 * 1024):
            spool.write(chunk)
        return replace(self.event, payload=spool.close())


def streamed_answer(
    proc: ev.Processing, rec: ResponseRecord, stream: StreamBody, *, collector: str, seq: int
) -> Event | Deferred:
    """The answer's event for a teed body, once it ended: its usage read back (up to `USAGE_MAX`),
    the body inline when small, else `Deferred` to its batch."""
    stream.finish()
    usage = ev.usage_of(proc, rec, stream.file.read() if stream.size <= USAGE_MAX else None)
    stream.file.seek(0)
    if stream.size <= INLINE_MAX:
        body = stream.file.read()
        stream.file.close()
        return ev.response_event(
            proc, rec, body, body_names=stream.names, usage=usage, collector=collector, seq=seq
        )
    placeholder = PayloadRef(sha256="", size=stream.size, text=False)
    event = ev.response_event(
        proc, rec, placeholder, body_names=stream.names, usage=usage, collector=collector, seq=seq
    )
    return Deferred(event=event, body=stream)
