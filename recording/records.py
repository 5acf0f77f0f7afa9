"""The immutable values the proxy's hooks hand to the writer thread.

Hooks run on mitmproxy's event loop, so they only copy references to bytes and strings into these
frozen records (O(1) work) and never pass the flow object, which mitmproxy keeps mutating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from recording.identity import EMPTY, Identity


@dataclass(frozen=True, slots=True)
class Exchange:
    """What both events of one exchange share: where it went, who sent it."""

    flow_id: str
    """The exchange's id in the Ledger (its action id, and its events' ids with their role): the
    mitmproxy flow's id as a UUIDv7 of the flow's creation time (`recording.action_ids`)."""
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
    at: float | None = None
    """When the chunk arrived (epoch seconds): the writer finds the first token's arrival among them."""


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
    timing: tuple[float | None, float | None, float | None, float | None] = (None, None, None, None)
    """(request started, first answer byte, last answer byte, first token of a stream), epoch seconds,
    None where unknown: the writer turns them into the event's millisecond offsets. The proxy puts the
    first body chunk's arrival last; the writer, which reads the chunks, replaces it with the arrival
    of the first one carrying content (`formats.first_token`)."""
    client_bytes: int | None = None
    """Of the answer's body, the bytes passed on to the client (None: no answer reached it)."""
    client_left: float | None = None
    """When the client left while the answer was still due (epoch seconds), else None."""


@dataclass(frozen=True, slots=True)
class WebSocketRecord:
    """One WebSocket message after an upgrade (`origin` client or server), or the close (`close`,
    with its code in `code` and its reason as `content`). `index` numbers the connection's messages."""

    exchange: Exchange
    at: float
    index: int
    origin: str
    content: bytes
    code: int | None = None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """A client connection that failed before any exchange on it (`error` says why): it is filed
    under its own action, the `exchange` naming its target and who connected."""

    exchange: Exchange
    at: float
    error: str


@dataclass(frozen=True, slots=True)
class StdioRecord:
    """One line of a stdio MCP session relayed by `flightlog mcp-record` (`origin` client or server),
    or the session's `start` and `end`. `data` is the line without its newline, or only its first bytes
    when it was over the size limit (relayed, not kept: `size` says how large). `index` numbers each
    origin's lines;
    `code` is the server's exit code at the end; `note` says what went wrong, if anything."""

    session: str
    server: str
    identity: Identity
    origin: str
    index: int
    at: float
    data: bytes
    size: int = 0
    code: int | None = None
    note: str | None = None

    @property
    def whole(self) -> bool:
        """Whether `data` is the entire line (not the start of one over the limit)."""
        return len(self.data) == self.size


@dataclass(frozen=True, slots=True)
class RefusalRecord:
    """A call the egress policy refused (`egress`): the rule and the limit that refused it, and the
    answer the caller got instead (`body`). With `attempt`, the call has no event of its own (a CONNECT,
    a raw connection, a DNS question), so the writer adds one opening the action."""

    exchange: Exchange
    at: float
    rule: str
    limit: str
    status: int | None = None
    tool: str | None = None
    body: bytes = b""
    attempt: bool = False


@dataclass(frozen=True, slots=True)
class SwapRecord:
    """Lent placeholders the proxy swapped for the real secrets on an exchange going to their hosts
    (`egress.credential_swap`): the secrets' names, never their values."""

    exchange: Exchange
    at: float
    names: tuple[str, ...]


Record = (
    RequestRecord
    | ResponseRecord
    | StreamChunk
    | WebSocketRecord
    | StdioRecord
    | RefusalRecord
    | AttemptRecord
    | SwapRecord
)


def chunks_lost(rec: ResponseRecord) -> ResponseRecord:
    """A streamed answer some of whose chunks a full queue dropped: `partial`, and says why."""
    return replace(rec, partial=True, error=rec.error or "chunks dropped: the writer queue was full")


def size_of(item: Record) -> int:
    """The body bytes an item holds in memory while it waits to be written (what queue bounds count)."""
    if isinstance(item, StreamChunk):
        return len(item.data)
    if isinstance(item, WebSocketRecord):
        return len(item.content)
    if isinstance(item, StdioRecord):
        return len(item.data) if item.data else 0
    if isinstance(item, AttemptRecord | SwapRecord):
        return 0
    return len(item.body) if item.body else 0


# -- the wire to the writer process -----------------------------------------------------------------
# Pickling these dataclasses goes through Python-level reduce calls, several times slower than plain
# tuples of bytes, strings and numbers, which pickle in C. Every field is listed: a new field must be
# added to both functions, and tests/capture/test_units.py round-trips each record type.

_REQUEST, _RESPONSE, _CHUNK, _WEBSOCKET, _STDIO, _REFUSAL, _ATTEMPT, _SWAP = 0, 1, 2, 3, 4, 5, 6, 7


def _exchange_wire(ex: Exchange) -> tuple[Any, ...]:
    who = ex.identity
    identity = None if who is EMPTY else (who.agent, who.session, who.task, who.turn)
    return (ex.flow_id, ex.direction, ex.method, ex.url, ex.host, identity)


def _exchange(wire: tuple[Any, ...]) -> Exchange:
    flow_id, direction, method, url, host, identity = wire
    return Exchange(flow_id, direction, method, url, host, EMPTY if identity is None else Identity(*identity))


OUT_OF_BAND = 8 * 1024
"""Bodies this large cross the pipe beside the pickle, not copied into it: the wire holds their index
in the frame's list of buffers (an int, which no body field otherwise is). A body shared by two
records (the request's, and the answer's copy for usage) is one buffer."""

Buffers = dict[int, tuple[int, bytes]]
"""id(body) -> (index, body) for one frame: every body is alive while the frame is built, and
insertion order is index order."""


def _body(data: bytes | None, buffers: Buffers | None) -> bytes | int | None:
    if buffers is None or data is None or len(data) < OUT_OF_BAND:
        return data
    found = buffers.get(id(data))
    if found is None:
        found = buffers[id(data)] = (len(buffers), data)
    return found[0]


def _resolve(field: bytes | int | None, buffers: Sequence[bytes]) -> bytes | None:
    return buffers[field] if isinstance(field, int) else field


def to_wire(item: Record, buffers: Buffers | None = None) -> tuple[Any, ...]:
    """An item as a tuple of plain values, for the pipe to the writer process; with `buffers`, large
    bodies are collected there and the tuple holds their index."""
    if isinstance(item, StreamChunk):
        return (_CHUNK, item.flow_id, _body(item.data, buffers), item.content_encoding, item.at)
    if isinstance(item, WebSocketRecord):
        wire = _exchange_wire(item.exchange)
        return (_WEBSOCKET, wire, item.at, item.index, item.origin, _body(item.content, buffers), item.code)
    if isinstance(item, StdioRecord):
        who = item.identity
        identity = None if who is EMPTY else (who.agent, who.session, who.task, who.turn)
        data = _body(item.data, buffers)
        return (_STDIO, item.session, item.server, identity, item.origin, item.index, item.at, data,
                item.size, item.code, item.note)  # fmt: skip
    if isinstance(item, AttemptRecord):
        return (_ATTEMPT, _exchange_wire(item.exchange), item.at, item.error)
    if isinstance(item, SwapRecord):
        return (_SWAP, _exchange_wire(item.exchange), item.at, item.names)
    if isinstance(item, RefusalRecord):
        wire = _exchange_wire(item.exchange)
        return (
            _REFUSAL,
            wire,
            item.at,
            item.rule,
            item.limit,
            item.status,
            item.tool,
            item.body,
            item.attempt,
        )
    if isinstance(item, RequestRecord):
        return (
            _REQUEST,
            _exchange_wire(item.exchange),
            item.at,
            item.head,
            _body(item.body, buffers),
            item.content_encoding,
        )
    return (
        _RESPONSE,
        _exchange_wire(item.exchange),
        item.at,
        item.status,
        item.head,
        _body(item.body, buffers),
        item.content_type,
        item.content_encoding,
        item.error,
        item.streamed,
        item.partial,
        _body(item.request_body, buffers),
        item.timing,
        item.client_bytes,
        item.client_left,
    )


def from_wire(wire: tuple[Any, ...], buffers: Sequence[bytes] = ()) -> Record:
    """The item `to_wire` was given (`buffers`: the frame's bodies, in index order)."""
    kind = wire[0]
    if kind == _CHUNK:
        _, flow_id, data, coding, at = wire
        return StreamChunk(flow_id, _resolve(data, buffers) or b"", coding, at)
    if kind == _REQUEST:
        _, ex, at, head, body, coding = wire
        return RequestRecord(_exchange(ex), at, head, _resolve(body, buffers), coding)
    if kind == _RESPONSE:
        (_, ex, at, status, head, body, ctype, coding, error, streamed, partial, request_body, timing,
         client_bytes, client_left) = wire  # fmt: skip
        return ResponseRecord(
            _exchange(ex), at, status, head, _resolve(body, buffers), ctype, coding, error, streamed, partial,
            _resolve(request_body, buffers), tuple(timing), client_bytes, client_left,
        )  # fmt: skip
    if kind == _WEBSOCKET:
        _, ex, at, index, origin, content, code = wire
        return WebSocketRecord(_exchange(ex), at, index, origin, _resolve(content, buffers) or b"", code)
    if kind == _STDIO:
        _, session, server, identity, origin, index, at, data, size, code, note = wire
        who = EMPTY if identity is None else Identity(*identity)
        data = _resolve(data, buffers) or b""
        return StdioRecord(session, server, who, origin, index, at, data, size, code, note)
    if kind == _ATTEMPT:
        _, ex, at, error = wire
        return AttemptRecord(_exchange(ex), at, error)
    if kind == _SWAP:
        _, ex, at, names = wire
        return SwapRecord(_exchange(ex), at, tuple(names))
    if kind == _REFUSAL:
        _, ex, at, rule, limit, status, tool, body, attempt = wire
        return RefusalRecord(_exchange(ex), at, rule, limit, status, tool, body, attempt)
    raise ValueError(f"not a wire record: kind {kind!r}")
