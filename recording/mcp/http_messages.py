"""MCP over HTTP through the proxy: each JSON-RPC message of an exchange becomes an event of its own.

The writer calls `derived()` for every event it makes; for an `http.request` or `http.response` that
carries MCP (streamable HTTP with a JSON or an SSE answer, or the older HTTP+SSE transport: a GET
event stream that announces an `endpoint`, and POSTs to it) it returns one event per message, after
the exchange's own. They follow the stdio rules (`formats.jsonrpc`, `storage.kinds.mcp_kind`): `kind`
`mcp.<method>` or `mcp.<method>.result`, `tool` from a `tools/call`, `method` the JSON-RPC method,
a JSON-RPC error or a tool's `isError` result in `error`. Beyond that:

- `action_id` is the exchange's (its flow id); `parent` is the call's key `mcp:SESSION:call:c:ID`
  (`:s:` for a request the server made), shared by the call and its answer even when the answer
  arrives on another stream (a GET stream, the old transport's SSE channel). SESSION is the
  `Mcp-Session-Id` header, the old transport's `session_id`/`sessionId` query parameter (or the
  one its `endpoint` event announced), else the exchange's flow id.
- No payload is stored twice: a message event is `payload_state` `artifact`, recorded by reference.
  Its id `EXCHANGE_EVENT:mcp:N` names where its bytes are: the Nth JSON-RPC message (in order: the
  body's object, each element of a batch array, each SSE `data` event) of the payload of the event
  `EXCHANGE_EVENT` — the stored bytes, so secrets are already replaced (content-encoding removed
  first). `message_at()` reads it back. `redacted` names the secrets replaced inside that message.
- The writer remembers each exchange's session and calls, bounded (`MEMORY`), so an answer knows its
  call's method; an answer to a call it never saw (another proxy worker's) is `mcp.result`.
- An event stream's messages become events while it is open (`recording.mcp.live`, from
  its chunks as they reach the writer), each carrying its own bytes until the stream's are stored;
  what the stream's end adds is the rest, numbered on from there.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from formats import codings
from formats import jsonrpc as rpc
from formats.errors import CodingError
from recording.stream_body import Deferred
from storage import kinds
from storage.events import Event

MEMORY: Final = 20_000
READ_MAX: Final = 16 * 1024 * 1024
"""Payloads up to this size (stored, and decoded) are read for messages (a larger one is not MCP
traffic worth parsing)."""
MCP_HEADERS: Final = (b"\nmcp-session-id:", b"\nmcp-protocol-version:", b"\nmcp-method:")
_SESSION_HEADER = re.compile(rb"\r\nmcp-session-id:[ \t]*([^\r\n]+)", re.IGNORECASE)
_TYPE_HEADER = re.compile(rb"\r\ncontent-type:[ \t]*([^\r\n]+)", re.IGNORECASE)
_CODING_HEADER = re.compile(rb"\r\ncontent-encoding:[ \t]*([^\r\n]+)", re.IGNORECASE)
_NAME = re.compile(r"\[([A-Za-z0-9_]+)\]")


@dataclass
class Flow:
    """An MCP exchange between its request and its answer: its session, its calls, and its request's
    event without head and payload (`base`: what a message of a still open answer is made from)."""

    session: str
    calls: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    base: Event | None = None


@dataclass
class Memory:
    """What the writer remembers between an exchange's request and its answer, and across streams."""

    flows: OrderedDict[str, Flow] = field(default_factory=OrderedDict)
    calls: OrderedDict[str, tuple[str, str | None]] = field(default_factory=OrderedDict)
    candidates: OrderedDict[str, Flow] = field(default_factory=OrderedDict)
    """GETs that ask for an event stream without saying MCP (the older HTTP+SSE transport's)."""
    live: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    """Open event streams read as they arrive: flow id -> `mcp_live.Live`."""

    def keep(self, memo: OrderedDict[str, Any], key: str, value: Any) -> None:
        memo[key] = value
        while len(memo) > MEMORY:
            memo.popitem(last=False)


MEMO = Memory()


def _header(pattern: re.Pattern[bytes], head: bytes) -> str:
    found = pattern.search(head)
    return found.group(1).decode("latin-1").strip() if found else ""


def _query_session(url: str | None) -> str:
    query = parse_qs(urlsplit(url or "").query)
    for name in ("session_id", "sessionId"):
        if query.get(name):
            return query[name][0]
    return ""


def message_at(payload: bytes, head: bytes, n: int) -> bytes:
    """The bytes of the Nth message of an exchange event's stored payload (the reader's side of the
    `artifact` reference); a batch element is re-serialized from its decoded value."""
    body = codings.decode(payload, _header(_CODING_HEADER, head) or None, cap=READ_MAX)
    found = [m for m in rpc.messages(body, _header(_TYPE_HEADER, head)) if m[0] != rpc.ENDPOINT]
    return found[n - 1][1]


def _mcp_headed(lowered_head: bytes) -> bool:
    """Whether a head (lower-cased) carries one of MCP's own headers."""
    return any(h in lowered_head for h in MCP_HEADERS)


def _looks_mcp(lowered_head: bytes, body: bytes) -> bool:
    return _mcp_headed(lowered_head) or (b'"jsonrpc"' in body and b'"method"' in body)


def _session_of(event: Event) -> str:
    return _header(_SESSION_HEADER, event.head) or _query_session(event.url) or event.action_id


def _flow_of(event: Event) -> Flow:
    """A request's flow, with its event kept as the base of messages of a still open answer."""
    return Flow(_session_of(event), base=replace(event, head=b"", payload=None))


_ACCEPT_HEADER = re.compile(rb"\r\naccept:[^\r\n]*text/event-stream", re.IGNORECASE)


def collect(
    found: Iterator[tuple[str, bytes, Any]], flow: Flow, known: bool
) -> tuple[list[tuple[rpc.Message, bytes]], bool] | None:
    """The JSON-RPC messages among `found` (an `endpoint` event sets the flow's session), and whether
    the exchange is now known to be MCP; None when a method says it is another JSON-RPC API."""
    out: list[tuple[rpc.Message, bytes]] = []
    for where, data, value in found:
        if where == rpc.ENDPOINT:
            flow.session = _query_session(data.decode("utf-8", "replace")) or flow.session
            known = True
            continue
        message = rpc.classify(value)
        if message.shape == "invalid":
            continue  # not a JSON-RPC message (over HTTP there is no line to account for)
        if message.method and not rpc.looks_like_mcp_method(message.method):
            return None  # another JSON-RPC API, not MCP
        known = known or message.method is not None
        out.append((message, data))
    return out, known


def derived(
    event: Event, read: Callable[[], bytes | None], next_seq: Callable[[], int], memo: Memory = MEMO
) -> list[Event]:
    """The message events of one exchange event (none for anything that is not MCP).

    `read()` gives the event's stored payload bytes (None when too large to read)."""
    if event.kind not in (kinds.HTTP_REQUEST, kinds.HTTP_RESPONSE):
        return []
    request = event.kind == kinds.HTTP_REQUEST
    flow = memo.flows.get(event.action_id)
    live = None if request else memo.live.pop(event.action_id, None)
    emitted = live.emitted if live is not None else 0  # made while the stream was open: not again
    lowered = event.head.lower()
    if not request and flow is None and b"text/event-stream" not in lowered:
        return []
    if event.payload_state not in ("complete", "partial"):
        if request and _mcp_headed(lowered):  # a GET stream's request
            memo.keep(memo.flows, event.action_id, _flow_of(event))
        elif request and event.method == "GET" and _ACCEPT_HEADER.search(event.head):
            memo.keep(memo.candidates, event.action_id, _flow_of(event))
        return []
    raw = read()
    if raw is None:
        return []
    try:
        body = codings.decode(raw, _header(_CODING_HEADER, event.head) or None, cap=READ_MAX)
    except CodingError:  # a body that does not decode as it claims (or past READ_MAX) is not read
        return []
    if request:
        if not _looks_mcp(lowered, body):
            return []
        flow = _flow_of(event)
        memo.keep(memo.flows, event.action_id, flow)
    known = flow is not None
    if flow is None:
        memo.candidates.pop(event.action_id, None)
        if b'"jsonrpc"' not in body and b"event: endpoint" not in body:
            return []  # an event stream of something else (an AI API's answer): not parsed
        flow = Flow(event.action_id)
    elif not request:
        memo.flows.pop(event.action_id, None)
    content_type = _header(_TYPE_HEADER, event.head).lower()
    origin = "client" if request else "server"
    collected = collect(rpc.messages(body, content_type), flow, known)
    if collected is None or not collected[1]:
        return []
    return [
        message_event(event, flow, origin, message, data, n, next_seq(), memo)
        for n, (message, data) in enumerate(collected[0], 1)
        if n > emitted
    ]


def message_event(
    event: Event, flow: Flow, origin: str, message: rpc.Message, data: bytes, n: int, seq: int, memo: Memory
) -> Event:
    """The Nth message of `event` (an `artifact` pointing into its payload), its call remembered."""
    side, other = ("c", "s") if origin == "client" else ("s", "c")
    parent, method, tool = None, message.method, message.tool
    if message.shape == "request" and message.id is not None and message.method:
        parent = f"mcp:{flow.session}:call:{side}:{message.id}"
        flow.calls[message.id] = (message.method, message.tool)
        memo.keep(memo.calls, parent, (message.method, message.tool))
    elif message.shape == "answer" and message.id is not None:
        parent = f"mcp:{flow.session}:call:{other}:{message.id}"
        known = flow.calls.get(message.id) or memo.calls.pop(parent, None)
        method, tool = known if known is not None else (None, None)
    text = data.decode("utf-8", "replace")
    names = tuple(n for n in event.redacted if f"[{n}]" in text)
    return replace(
        event,
        event_id=f"{event.event_id}:mcp:{n}",
        kind=kinds.mcp_kind(message.shape, message.method, method),
        seq=seq,
        method=method,
        tool=tool,
        status=None,
        head=b"",
        payload=None,
        payload_state="artifact",
        redacted=names,
        error=message.error,
        parent=parent,
        model=None,
        tokens_in=None,
        tokens_out=None,
        cost_usd=None,
    )


def derived_from(item: Event | Deferred, next_seq: Callable[[], int]) -> list[Event]:
    """`derived()` for what the writer queues: an event, or one whose large body waits in a spool."""
    if isinstance(item, Event):
        payload = item.payload
        return derived(item, lambda: payload if isinstance(payload, bytes) else None, next_seq)

    def spooled() -> bytes | None:
        if item.body.size > READ_MAX:
            return None
        item.body.file.seek(0)
        data = item.body.file.read()
        item.body.file.seek(0)
        return bytes(data)

    return derived(item.event, spooled, next_seq)
