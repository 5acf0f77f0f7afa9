"""A teed answer body on its way to the Ledger: redacted as it arrives, memory bounded.

Bodies stay in memory up to the Ledger's inline limit and spill to a temporary file past it; a
large one is uploaded through `Ledger.spool()` just before the batch that references it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any

from storage.events import Event


@dataclass
class StreamBody:
    """A teed body being received: redacted as it arrives, kept in memory up to INLINE_MAX, then on disk."""

    file: IO[bytes]
    redactor: Any = None
    size: int = 0
    names: frozenset[str] = frozenset()

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
