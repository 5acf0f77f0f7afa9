"""A teed answer body on its way to the Ledger: redacted as it arrives, memory bounded.

Bodies stay in memory up to the Ledger's inline limit and spill to a temporary file past it; the
answer's event carries a small one itself, and a large one is uploaded through `Ledger.spool()` just
before the batch that references it (`Deferred`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from formats.first_token import Watch
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
    note: str | None = None
    """Why the body was searched for secrets as stored, not decoded (`StreamRedactor.problem`)."""
    first_token: Watch = field(default_factory=Watch)
    """Reads the chunks as they arrived (before redaction, which may hold bytes back) for the
    arrival of the first one carrying the model's output."""

    @classmethod
    def spooled(cls, redactor: Any = None, content_encoding: str = "") -> StreamBody:
        """A body in memory up to the Ledger's inline limit, on disk past it; `redactor` a
        `StreamRedactor` (or None: nothing to redact)."""
        return cls(
            file=tempfile.SpooledTemporaryFile(max_size=INLINE_MAX),
            redactor=redactor,
            first_token=Watch(content_encoding),
        )

    def write(self, data: bytes, at: float | None = None) -> None:
        """Take the next chunk, which arrived at `at` (epoch seconds, None when unknown)."""
        self.first_token.feed(data, at)
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
            problem = self.redactor.problem
            self.note = None if problem is None else f"The body was {problem}"
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
    proc: ev.Processing,
    rec: ResponseRecord,
    stream: StreamBody,
    *,
    collector: str,
    seq: int,
    lost: bool = False,
) -> Event | Deferred:
    """The answer's event for a teed body, once it ended: its usage read back (up to `USAGE_MAX`),
    its first token's arrival (none when chunks were `lost`: one of them may have held it), the body
    inline when small, else `Deferred` to its batch."""
    stream.finish()
    first_token = None if lost else stream.first_token.at
    rec = replace(rec, timing=(*rec.timing[:3], first_token))
    usage = ev.usage_of(proc, rec, stream.file.read() if stream.size <= USAGE_MAX else None)
    stream.file.seek(0)
    if stream.size <= INLINE_MAX:
        body = stream.file.read()
        stream.file.close()
        return ev.response_event(
            proc,
            rec,
            body,
            body_names=stream.names,
            usage=usage,
            note=stream.note,
            collector=collector,
            seq=seq,
        )
    placeholder = PayloadRef(sha256="", size=stream.size, text=False)
    event = ev.response_event(
        proc,
        rec,
        placeholder,
        body_names=stream.names,
        usage=usage,
        note=stream.note,
        collector=collector,
        seq=seq,
    )
    return Deferred(event=event, body=stream)
