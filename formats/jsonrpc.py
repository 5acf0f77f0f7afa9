"""JSON-RPC 2.0 as MCP speaks it: what one message is, and where the messages of a body are.

`parse`/`classify` say what one message is (`Message`: request, notification, answer or invalid,
with its method, id, tool, error and progress token); `peek` reads the id and method from the first
bytes of a message too large to keep. `tool_calls` is the one reader of the `tools/call`s a body or
a message asks for (the egress policy's, over HTTP, WebSocket and stdio, and the door's), strict
where servers are lenient: what it cannot read for certain it says it cannot read.

Where the messages are: `StdioLines` cuts a stdio stream into them (one a line); `messages` finds
every message of an HTTP body, whatever its framing: one JSON object, a batch array, or server-sent
events (`formats.sse`) each holding one message or a batch (the older HTTP+SSE transport's
`endpoint` event is yielded too). The stdio relay (`flightlog mcp-record`), the writer's reading of
MCP over HTTP, the door's MCP calls and the readers of the Ledger share these rules. The Ledger's
kinds for them are `storage.kinds.mcp_kind`.

Pure functions over bytes (and one small reader); they never raise on bad input: what is not a
message is `invalid`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from formats import sse

MCP_METHOD_ROOTS: Final = frozenset(
    {
        "initialize", "ping", "tools", "resources", "prompts", "notifications", "completion", "logging",
        "sampling", "elicitation", "roots", "server", "tasks",
    }
)  # fmt: skip
"""First segments of MCP's method names: a JSON-RPC request over HTTP is read as MCP only with one
(or with an MCP header), so another JSON-RPC API through the proxy is not mistaken for it."""
ERROR_MAX: Final = 300
TOOLS_CALL: Final = "tools/call"

Shape = Literal["request", "notification", "answer", "invalid"]


@dataclass(frozen=True, slots=True)
class Message:
    """One message, classified. `id` is the JSON-RPC id as JSON text (`7`, `"a-1"`), so it keys."""

    shape: Shape
    method: str | None = None
    id: str | None = None
    tool: str | None = None
    error: str | None = None
    code: int | None = None
    progress_token: str | None = None
    """A request's `_meta.progressToken`, or a progress notification's `progressToken` (JSON text)."""
    refers_to: str | None = None
    """A `notifications/cancelled`'s `requestId` (JSON text)."""


def _key(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return json.dumps(value, ensure_ascii=False)


def _clip(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= ERROR_MAX else line[: ERROR_MAX - 1] + "…"


def parse(data: bytes) -> Message:
    """The message in `data` (one JSON-RPC object); `invalid` with the reason when it is not one."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        return Message("invalid", error=_clip(f"not JSON: {e}"))
    return classify(obj)


def classify(obj: Any) -> Message:
    """A decoded JSON value as a message (a batch array is split by the caller)."""
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        return Message("invalid", error="not a JSON-RPC 2.0 message")
    method = obj.get("method")
    rpc_id = _key(obj.get("id")) if "id" in obj else None
    if isinstance(method, str):
        params: dict[str, Any] = obj["params"] if isinstance(obj.get("params"), dict) else {}
        meta: dict[str, Any] = params["_meta"] if isinstance(params.get("_meta"), dict) else {}
        found = tool_call_of(obj) if method == TOOLS_CALL else None
        tool = found.name if isinstance(found, ToolCall) else None
        token = _key(meta.get("progressToken")) or (
            _key(params.get("progressToken")) if method == "notifications/progress" else None
        )
        refers = _key(params.get("requestId")) if method == "notifications/cancelled" else None
        shape: Shape = "request" if rpc_id is not None else "notification"
        return Message(shape, method, rpc_id, tool, progress_token=token, refers_to=refers)
    if rpc_id is None and obj.get("id") is not None:
        return Message("invalid", error="a JSON-RPC answer whose id is neither a string nor a number")
    if "error" in obj:
        err: dict[str, Any] = obj["error"] if isinstance(obj.get("error"), dict) else {}
        code = err.get("code") if isinstance(err.get("code"), int) else None
        text = _clip(f"{code}: {err.get('message', '')}" if code is not None else str(err.get("message")))
        return Message("answer", id=rpc_id, error=text, code=code)
    if "result" in obj:
        return Message("answer", id=rpc_id, error=_tool_error(obj.get("result")))
    return Message("invalid", error="a JSON-RPC object with neither method, result nor error")


def _tool_error(result: Any) -> str | None:
    """`tool error: <first text>` for a result flagged `isError` (a tool that ran and failed)."""
    if not isinstance(result, dict) or result.get("isError") is not True:
        return None
    for part in result.get("content") or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            return _clip(f"tool error: {part['text']}")
    return "tool error"


PEEK: Final = 4096
"""Bytes kept of a message too large to keep: enough for `peek` to find its id and method."""
_PEEK_ID = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_PEEK_METHOD = re.compile(rb'^\s*\{[^{}\[\]]*?"method"\s*:\s*"([^"\\]{1,200})"')


def peek(prefix: bytes) -> Message:
    """What the first bytes of a message too large to keep say: its id and method when they come
    before any nested object (as the SDKs write them); `invalid` when they do not."""
    found_id, found_method = _PEEK_ID.search(prefix), _PEEK_METHOD.search(prefix)
    rpc_id = _key(json.loads(found_id.group(1))) if found_id else None
    if found_method:
        method = found_method.group(1).decode("utf-8", "replace")
        return Message("request" if rpc_id is not None else "notification", method, rpc_id)
    if rpc_id is not None:
        return Message("answer", id=rpc_id)
    return Message("invalid")


def looks_like_mcp_method(method: str | None) -> bool:
    """Whether a JSON-RPC method is one of MCP's (by its first segment)."""
    return bool(method) and (method or "").split("/", 1)[0] in MCP_METHOD_ROOTS


ENDPOINT: Final = "endpoint"
"""The SSE event type by which the older HTTP+SSE transport announces where to POST."""


def messages(body: bytes, content_type: str) -> Iterator[tuple[str, bytes, Any]]:
    """Each JSON-RPC message of a body as (where, its bytes, its decoded value): `where` is `json`
    or, for a body its content type declares an event stream, the SSE event's type; an `endpoint`
    event is yielded as (`endpoint`, its data, None). A batch element's bytes are its value
    re-serialized; anything that is not JSON is skipped."""
    if sse.declared(content_type):
        yield from event_messages(sse.events(body))
    else:
        yield from _parts("json", body)


def event_messages(events: Iterable[sse.Event]) -> Iterator[tuple[str, bytes, Any]]:
    """`messages` of server-sent events already read (a live stream's, as they complete)."""
    for event in events:
        if event.type == ENDPOINT:
            yield ENDPOINT, event.data, None
        else:
            yield from _parts(event.type, event.data)


def _parts(where: str, data: bytes) -> Iterator[tuple[str, bytes, Any]]:
    try:
        value = json.loads(data)
    except ValueError:
        return
    if isinstance(value, list):
        for part in value:
            yield where, json.dumps(part).encode(), part
    else:
        yield where, data, value


class StdioLines:
    """MCP's stdio framing: one direction's byte stream cut into messages, one a line, holding at
    most `limit` bytes of a partial one (a longer line keeps its first `PEEK` bytes, for `peek`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.index = 0
        self._parts: list[bytes] = []
        self._size = 0
        self._over = False

    def feed(self, chunk: bytes) -> list[tuple[int, bytes, int]]:
        """The lines `chunk` completes, as (index, bytes — only the first `PEEK` over the limit —, size)."""
        out = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:nl])
            out.append(self._finish())
            start = nl + 1
        if start < len(chunk):
            self._add(chunk[start:] if start else chunk)
        return out

    def rest(self) -> tuple[int, bytes, int] | None:
        """What is left without a newline when the stream ended, if anything."""
        return self._finish() if self._size or self._over else None

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        if self._over:
            return
        if self._size > self.limit:
            self._over, self._parts = True, [(b"".join(self._parts) + piece[:PEEK])[:PEEK]]
        elif piece:
            self._parts.append(piece)

    def _finish(self) -> tuple[int, bytes, int]:
        self.index += 1
        data = b"".join(self._parts)
        found = (self.index, data, self._size)
        self._parts, self._size, self._over = [], 0, False
        return found


# -- the tools/call reader ---------------------------------------------------------------------------

READ_MAX: Final = 8 * 1024 * 1024
"""Larger bodies and messages are not parsed for their calls (the proxy does not read request bodies
over 8 MiB either): one that may hold a call is `unreadable`."""
_FIRST_BYTE: Final = re.compile(rb"[^ \t\r\n\x0b\x0c]")
"""The first byte after JSON's whitespace (and the two more Python's `strip` takes)."""
_SPELLED: Final = {"jsonrpc", "method", "params", "id", "name", "arguments"}
"""Keys a server may read whatever their letter case (Go's encoding/json does): one spelled in
another case is read as unreadable rather than ignored."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One `tools/call`: its id as sent (decoded; None for a notification), the tool, its arguments."""

    id: Any
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """What a body or message asks of tools. `rpc`: it holds JSON-RPC requests at all; `calls`: its
    `tools/call`s in order; `batch`: it was a JSON array; `unreadable`: why it may hold a call that
    cannot be read for certain (too large, not JSON, a duplicate key, a call without a tool name)."""

    rpc: bool = False
    calls: tuple[ToolCall, ...] = ()
    batch: bool = False
    unreadable: str | None = None

    @property
    def ids(self) -> list[Any]:
        """The calls' ids, to answer each (notifications have none)."""
        return [c.id for c in self.calls if c.id is not None]


NOT_RPC: Final = ToolCalls()


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object, refusing a key given twice: in any letter case, since servers differ on which of
    two one takes and whether case matters at all."""
    out = dict(pairs)
    if len(out) != len(pairs) or len({k.casefold() for k in out}) != len(out):
        seen: set[str] = set()
        for key, _ in pairs:
            if key.casefold() in seen:
                raise _Duplicate(f"the key {key!r} is given twice")
            seen.add(key.casefold())
    return out


def looks_like_json(data: bytes) -> bool:
    """Whether a body may be a JSON object or array (a server would try to parse it as one): it
    opens with one after JSON's whitespace, or with a byte-order mark or the zero bytes of UTF-16/32."""
    head = data[:4]
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
        return True
    first = _FIRST_BYTE.search(data)
    return first is not None and first.group() in (b"{", b"[")


def tool_calls(data: bytes | None, limit: int = READ_MAX) -> ToolCalls:
    """The `tools/call`s a body or a message (HTTP, WebSocket, one stdio line) asks for.

    Fails closed where a server could read what this does not: a body over `limit`, or one that
    looks like JSON but does not parse (trailing bytes included), is `unreadable`; so is a
    JSON-RPC message with a key given twice anywhere (two `"name"`s: which one a server takes is
    its own choice) or spelled in another letter case, and a `tools/call` without a tool name. A
    message counts as a call by its `method` alone, whatever its `jsonrpc` says."""
    if not data:
        return NOT_RPC
    if len(data) > limit:
        if looks_like_json(data):
            return ToolCalls(unreadable=f"{len(data):,} bytes, over the {limit:,} a call is read up to")
        return NOT_RPC
    try:
        value = json.loads(data, object_pairs_hook=_pairs)
    except _Duplicate as e:
        duplicate = str(e)
        if _mentions_method(data):
            return ToolCalls(rpc=True, unreadable=f"{duplicate}: which one a server reads is its own choice")
        return NOT_RPC
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        if looks_like_json(data):
            return ToolCalls(unreadable=_clip(f"it looks like JSON but is not: {e}"))
        return NOT_RPC
    batch = isinstance(value, list)
    messages = value if batch else [value]
    if not any(isinstance(m, dict) and "method" in _folded(m) for m in messages):
        return NOT_RPC
    calls: list[ToolCall] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if odd := _odd_spelling(message):
            return ToolCalls(rpc=True, batch=batch, unreadable=odd)
        if message.get("method") != TOOLS_CALL:
            continue
        found = tool_call_of(message)
        if isinstance(found, str):
            return ToolCalls(rpc=True, batch=batch, unreadable=found)
        calls.append(found)
    return ToolCalls(rpc=True, calls=tuple(calls), batch=batch)


def tool_call_of(message: dict[str, Any]) -> ToolCall | str:
    """A `tools/call` message's call, or why it names no tool (the reason, a string)."""
    params = message.get("params")
    if not isinstance(params, dict):
        return "a tools/call without params"
    if odd := _odd_spelling(params):
        return odd
    name = params.get("name")
    if not isinstance(name, str) or not name:
        return "a tools/call without a tool name"
    return ToolCall(message.get("id"), name, params.get("arguments"))


def _folded(obj: dict[str, Any]) -> set[str]:
    return {k.casefold() for k in obj}


def _odd_spelling(obj: dict[str, Any]) -> str | None:
    for key in obj:
        folded = key.casefold()
        if folded in _SPELLED and key != folded:
            return f"the key {key!r} is JSON-RPC's {folded!r} in another letter case"
    return None


def _mentions_method(data: bytes) -> bool:
    """Whether a body with a duplicate key may be JSON-RPC: it has a `method` key in some case."""
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return True
    messages = value if isinstance(value, list) else [value]
    return any(isinstance(m, dict) and "method" in _folded(m) for m in messages)
