"""The values the Ledger takes and gives back: events, batches, append results.

An `Event` is never changed once made (`dataclasses.replace` makes a changed copy) and is
self-contained, so a producer can hand it to a writer thread without sharing anything mutable. Its
`event_id` is the source's own stable id, fixed when the event is created, so a retried write is
the same write.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

PayloadState = Literal["complete", "partial", "none", "artifact", "missing"]
Direction = Literal["in", "out"]

PAYLOAD_STATES: Final = ("complete", "partial", "none", "artifact", "missing")
STATES_WITH_BYTES: Final = ("complete", "partial")
INLINE_MAX: Final = 256 * 1024
"""Payloads up to this many bytes are kept (compressed) inside the database; larger ones in the blob store."""


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """A payload already stored in the blob store (a streamed body spooled by `Spool`)."""

    sha256: str
    size: int
    text: bool
    stored_size: int = 0
    """Bytes the compressed object occupies in the store (0 when unknown)."""


@dataclass(slots=True)
class Event:
    """One thing that happened, as a producer hands it to the Ledger.

    `payload` is the exact bytes (or a `PayloadRef` to bytes already stored); it must be given
    exactly when `payload_state` is `complete` or `partial`.

    Not `frozen` (nothing assigns to an event's fields all the same): a frozen dataclass's
    `__init__` sets each of these 33 fields through `object.__setattr__`, several times slower, and
    the writer makes two an exchange (a measurable share of its CPU a request, bench.writer).
    """

    event_id: str
    action_id: str
    kind: str
    direction: Direction
    at: datetime
    collector: str = ""
    seq: int = 0
    method: str | None = None
    url: str | None = None
    host: str | None = None
    status: int | None = None
    tool: str | None = None
    session: str | None = None
    task: str | None = None
    turn: str | None = None
    agent: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    head: bytes = b""
    payload: bytes | PayloadRef | None = None
    payload_state: PayloadState = "none"
    redacted: tuple[str, ...] = ()
    error: str | None = None
    parent: str | None = None
    """Another action this one refers to (a replay's original, a dispatch's call)."""
    escaped: bool = False
    """The text columns hold `storage.escaped`'s lossless form (the exact bytes are in `head`)."""
    first_byte_ms: float | None = None
    """An answer's first byte, in milliseconds after its request started (None: unknown)."""
    last_byte_ms: float | None = None
    """An answer's last byte, in milliseconds after its request started (None: unknown)."""
    first_token_ms: float | None = None
    """A streamed AI answer's first token, in milliseconds after its request started."""
    client_bytes: int | None = None
    """Of an answer's body, the bytes the proxy passed on to its client (None: no answer, or not an
    exchange); fewer than the payload's when the client left before the end."""
    client_left_ms: float | None = None
    """When the client left while its answer was still due, in milliseconds after its request
    started (None: it stayed to the end)."""
    cache_read_tokens: int | None = None
    """Of `tokens_in`, those read from the provider's prompt cache (None: not said)."""
    cache_write_tokens: int | None = None
    """Of `tokens_in`, those written to the provider's prompt cache (None: not said)."""
    reasoning_tokens: int | None = None
    """Of `tokens_out`, the model's reasoning (None: not said)."""
    cache_write_1h_tokens: int | None = None
    """Of `cache_write_tokens`, those kept in the cache for an hour (None: not said)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the Ledger keeps it: the payload is an address, read with `Ledger.payload()`."""

    event_id: str
    action_id: str
    kind: str
    direction: str
    at: datetime
    collector: str
    seq: int
    method: str | None
    url: str | None
    host: str | None
    status: int | None
    tool: str | None
    session: str | None
    task: str | None
    turn: str | None
    agent: str | None
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    head: bytes
    payload_state: str
    payload_sha256: str | None
    payload_size: int | None
    payload_text: bool | None
    redacted: tuple[str, ...]
    error: str | None
    parent: str | None
    escaped: bool
    first_byte_ms: float | None
    last_byte_ms: float | None
    first_token_ms: float | None
    client_bytes: int | None
    client_left_ms: float | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    cache_write_1h_tokens: int | None
    fingerprint: str

    def to_json(self) -> dict[str, Any]:
        """A stable JSON form: `head` as text when it is UTF-8, and always as `head_base64`."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "head":
                try:
                    out["head"] = value.decode("utf-8")
                except UnicodeDecodeError:
                    out["head"] = None
                out["head_base64"] = base64.b64encode(value).decode("ascii")
            elif name == "at":
                out["at"] = value.isoformat()
            elif name == "redacted":
                out["redacted"] = list(value)
            else:
                out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class Batch:
    """What one collector delivers at once; it commits whole or not at all.

    `position` is the collector's delivered position after this batch (monotonic per collector),
    so a collector that restarts knows where to resume.
    """

    collector: str
    position: int
    events: tuple[Event, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Conflict:
    """An `event_id` that arrived again with different content; the stored version is kept."""

    event_id: str
    stored_fingerprint: str
    offered_fingerprint: str


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The accounting of one `append`: how many events were new, repeated or in conflict."""

    batch_id: str
    received: int
    new: int
    duplicates: int
    conflicts: tuple[Conflict, ...] = ()
