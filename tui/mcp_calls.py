"""MCP calls as a person reads them: what was called with which arguments, and what came back.

An MCP request's event and its result's share a call key: the `action_id` of a stdio session's events
(`mcp:SESSION:call:c:ID`), the `parent` of messages under an exchange through the proxy (whose result
may have come on another stream, so under another exchange). Pure functions over events and the
message bytes already read; the exchange screen shows their text in its `mcp` tab.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from formats import documents
from storage.events import StoredEvent
from storage.exchanges import RESULT_SUFFIX, STDIO_HOST
from storage.kinds import MCP_EXIT, MCP_INVALID, MCP_PREFIX, MCP_START

NOT_CALLS: Final = (MCP_START, MCP_EXIT, MCP_INVALID)
CALLS_MAX: Final = 400
"""Messages of one exchange read for its calls at most (a session's GET stream can carry thousands;
the inner tab lists them all)."""
SHOW_MAX: Final = 4000
"""Characters of arguments or of a result shown at most (the request and answer tabs hold all)."""


@dataclass(frozen=True, slots=True)
class McpCall:
    """One MCP request, and its result when one was recorded."""

    request: StoredEvent
    message: Any
    result: StoredEvent | None = None
    answer: Any = None


def is_result(event: StoredEvent) -> bool:
    return event.kind.startswith(MCP_PREFIX) and event.kind.endswith(RESULT_SUFFIX)


def is_request(event: StoredEvent) -> bool:
    """A JSON-RPC request (not a notification, a result, a session edge or a line that is not JSON)."""
    kind = event.kind
    return (
        kind.startswith(MCP_PREFIX)
        and kind not in NOT_CALLS
        and not is_result(event)
        and not kind.startswith(f"{MCP_PREFIX}notifications/")
        and call_key(event) is not None
    )


def call_key(event: StoredEvent) -> str | None:
    """The key a request shares with its result: the action on stdio, `parent` over HTTP."""
    if event.host == STDIO_HOST:
        return event.action_id if ":call:" in event.action_id else None
    return event.parent


def pair(events: Sequence[StoredEvent], messages: Mapping[str, bytes | None]) -> list[McpCall]:
    """Each request among `events` with its result (by call key), in recorded order; `messages` maps
    an event id to the message's bytes (None where they were not kept)."""
    results = {call_key(e): e for e in events if is_result(e) and call_key(e) is not None}
    out = []
    for e in events:
        if not is_request(e):
            continue
        result = results.get(call_key(e))
        answer = documents.parse(messages.get(result.event_id)) if result is not None else None
        out.append(McpCall(e, documents.parse(messages.get(e.event_id)), result, answer))
    return out


def title(call: McpCall) -> str:
    """`tools/call echo (id 3)`."""
    e = call.request
    rpc_id = call.message.get("id") if isinstance(call.message, dict) else None
    what = " ".join(x for x in (e.method or e.kind[len(MCP_PREFIX) :], e.tool) if x)
    return what + (f" (id {json.dumps(rpc_id)})" if rpc_id is not None else "")


def _pretty(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return text if len(text) <= SHOW_MAX else text[: SHOW_MAX - 1] + "…"


def arguments(call: McpCall) -> Any:
    """A `tools/call`'s arguments; any other request's params."""
    params = call.message.get("params") if isinstance(call.message, dict) else None
    if call.request.tool and isinstance(params, dict) and "arguments" in params:
        return params["arguments"]
    return params


def duration_ms(call: McpCall) -> float | None:
    if call.result is None:
        return None
    return max(0.0, (call.result.at - call.request.at).total_seconds() * 1000)


def text(call: McpCall) -> str:
    """Arguments, then the result or the error with how long it took."""
    if call.message is None:
        lines = ["arguments  (message not kept)"]
    else:
        lines = ["arguments", _pretty(arguments(call))]
    if call.result is None:
        lines.append("\nresult     (none recorded: unanswered, or answered where it was not recorded)")
        return "\n".join(lines)
    took = duration_ms(call)
    when = f"after {took:.0f} ms" if took is not None else ""
    elsewhere = "" if call.result.action_id == call.request.action_id else ", on another stream"
    answer = call.answer if isinstance(call.answer, dict) else {}
    if call.result.error:
        lines.append(f"\nerror      {call.result.error}  ({when}{elsewhere})")
    else:
        lines.append(f"\nresult     ({when}{elsewhere})")
    if "error" in answer:
        lines.append(_pretty(answer["error"]))
    elif "result" in answer:
        lines.append(_pretty(answer["result"]))
    elif call.answer is None:
        lines.append("(message not kept)")
    return "\n".join(lines)
