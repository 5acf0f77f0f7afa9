"""What one MCP JSON-RPC message is, for the Ledger: its kind, method, id, tool and error.

Shared by the stdio relay (`flightlog mcp-record`) and the writer's reading of MCP over HTTP, so both
follow one rule set (listed in `storage.kinds`):

- a request or notification is `mcp.<method>` (`mcp.tools/call`, `mcp.notifications/progress`);
- a result or error answer is `mcp.<method>.result`, the method being the call's (`mcp.result` when
  the call was not seen); a JSON-RPC error is the event's `error` (`CODE: message`), and a
  `tools/call` result with `isError: true` is one too (`tool error: <first text>`);
- anything else that arrived where a message belongs is `mcp.invalid`, with why in `error`.

Pure functions: bytes in, a `Message` out; they never raise on bad input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

PREFIX: Final = "mcp."
INVALID: Final = "mcp.invalid"
UNKNOWN_RESULT: Final = "mcp.result"
RESULT_SUFFIX: Final = ".result"
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


def kind_of(message: Message, call_method: str | None = None) -> str:
    """The event kind: `mcp.<method>` for a call, `mcp.<call's method>.result` for its answer."""
    if message.shape == "invalid":
        return INVALID
    if message.shape == "answer":
        return f"{PREFIX}{call_method}{RESULT_SUFFIX}" if call_method else UNKNOWN_RESULT
    return f"{PREFIX}{message.method}"


def looks_like_mcp_method(method: str | None) -> bool:
    """Whether a JSON-RPC method is one of MCP's (by its first segment)."""
    return bool(method) and (method or "").split("/", 1)[0] in MCP_METHOD_ROOTS
