"""JSON-RPC 2.0 as MCP speaks it: what one message is, and where the messages of a body are.

`parse`/`classify` say what one message is (`Message`: request, notification, answer or invalid,
with its method, id, tool, error and progress token); `peek` reads the id and method from the first
bytes of a message too large to keep. Where the messages are: `StdioLines` cuts a stdio stream into
them (one a line); `messages` finds every message of an HTTP body, whatever its framing: one JSON
object, a batch array, or server-sent events (`formats.sse`) each holding one message or a batch
(the older HTTP+SSE transport's `endpoint` event is yielded too). The stdio relay (`flightlog
mcp-record`), the writer's reading of MCP over HTTP, the door's MCP calls and the readers of the
Ledger share these rules. The Ledger's kinds for them are `storage.kinds.mcp_kind`.

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
        tool = params.get("name") if method == "tools/call" and isinstance(params.get("name"), str) else None
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
