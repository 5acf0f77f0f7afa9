"""The immutable values the proxy's hooks hand to the writer thread.

Hooks run on mitmproxy's event loop, so they only copy references to bytes and strings into these
frozen records (O(1) work) and never pass the flow object, which mitmproxy keeps mutating.
"""

from __future__ import annotations

from dataclasses import dataclass

from addons.identity import EMPTY, Identity


@dataclass(frozen=True, slots=True)
class Exchange:
    """What both events of one exchange share: where it went, who sent it."""

    flow_id: str
    direction: str
    method: str
    url: str
    host: str
    identity: Identity = EMPTY


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """A request as the client sent it. `body` is None when it was streamed through unread."""

    exchange: Exchange
    at: float
    head: bytes
    body: bytes | None
    content_encoding: str = ""


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """A piece of a teed response body, in arrival order; the `ResponseRecord` follows the last one."""

    flow_id: str
    data: bytes
    content_encoding: str = ""
    """The answer's content-encoding, so the writer can redact inside it as it streams."""


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    """The answer (or the failure in `error`). With `streamed`, the body is the flow's `StreamChunk`s.

    `request_body` rides along (a reference, not a copy) so the writer can read model and token
    usage from the pair.
    """

    exchange: Exchange
    at: float
    status: int | None
    head: bytes
    body: bytes | None
    content_type: str = ""
    content_encoding: str = ""
    error: str | None = None
    streamed: bool = False
    partial: bool = False
    request_body: bytes | None = None


def size_of(item: RequestRecord | ResponseRecord | StreamChunk) -> int:
    """The body bytes an item holds in memory while it waits to be written (what queue bounds count)."""
    if isinstance(item, StreamChunk):
        return len(item.data)
    return len(item.body) if item.body else 0
