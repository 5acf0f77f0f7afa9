"""What a body or a message asks the judge: the `Call`s to judge for it, from the one `tools/call`
reader (`formats.jsonrpc.tool_calls`), the same for an HTTP body, a WebSocket message and a stdio line.

`calls_in_message(data, base)` is the verdict input: `base` is the call as the connection or request
makes it (host, port, method, path, caller), and the answer holds one `Call` per `tools/call` in
`data` (its tool and arguments filled in), or `base` itself when there is none. What may hold a call
but cannot be read for certain (over `READ_MAX`, JSON that does not parse, a duplicate key, a call
without a tool name) is `base` marked `unreadable`: the policy refuses it when a rule looks at tools
(`Policy.reads_mcp`), and judges it as `base` otherwise. A body streamed through unread (too large
to hold) is `unread_body`: unreadable when it may be JSON.

Pure functions: whoever hands bytes over (the addon's request and WebSocket hooks, `egress.stdio`)
judges each call in turn and answers the first refusal (`egress.answers`: a JSON-RPC error for
`ids`, an array when `batch`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Final

from egress.rules import Call
from formats.jsonrpc import PEEK, READ_MAX, ToolCall, peek, tool_calls

__all__ = ["READ_MAX", "Asked", "ToolCall", "calls_in_message", "unread_body"]

JSON_TYPES: Final = ("json", "javascript", "text/plain")
"""Content types a server may read a JSON-RPC body from: any `json` (application/json,
application/json-rpc, +json), what lenient servers also take, and none at all."""


@dataclass(frozen=True, slots=True)
class Asked:
    """The calls one body or message asks the judge about, in order, and how to answer a refusal:
    the JSON-RPC ids of its `tools/call`s and whether it was a batch (an array answers it)."""

    calls: tuple[Call, ...]
    call_ids: tuple[Any, ...] = ()
    """Each call's JSON-RPC id as sent (None for a notification), in the order of `calls`; for an
    unreadable message, the id its first bytes name if any (`formats.jsonrpc.peek`)."""
    batch: bool = False

    @property
    def ids(self) -> list[Any]:
        """The ids to answer a refusal with (notifications have none)."""
        return [i for i in self.call_ids if i is not None]

    def id_of(self, index: int) -> Any:
        """The id of call `index`, else the first id of the body (what its refusal is filed under)."""
        own = self.call_ids[index] if index < len(self.call_ids) else None
        return own if own is not None else next(iter(self.ids), None)

    @property
    def tool_calls(self) -> bool:
        """Whether the calls are `tools/call`s (answered in JSON-RPC), not the request as such."""
        return any(c.tool is not None for c in self.calls)

    @property
    def unreadable(self) -> bool:
        return any(c.unreadable is not None for c in self.calls)


def calls_in_message(data: bytes | None, base: Call) -> Asked:
    """The calls `data` (an HTTP body, a WebSocket message, a stdio line) asks for, over `base`."""
    found = tool_calls(data)
    if found.unreadable is not None:
        return Asked((replace(base, unreadable=found.unreadable),), _peeked_id(data or b""))
    if not found.calls:
        return Asked((base,))
    calls = tuple(replace(base, tool=c.name, arguments=c.arguments) for c in found.calls)
    return Asked(calls, tuple(c.id for c in found.calls), found.batch)


def _peeked_id(data: bytes) -> tuple[Any, ...]:
    """The id an unreadable message's first bytes name, to answer it by (none when they name none)."""
    message = peek(data[:PEEK].lstrip())
    if message.id is None or message.shape != "request":
        return ()
    return (json.loads(message.id),)


def unread_body(base: Call, size: int | None, content_type: str) -> Asked:
    """A body streamed through unread (over the size the proxy holds): `base`, marked unreadable
    when the body may be JSON (its content type is one a JSON-RPC server reads, or absent)."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype and not any(t in ctype for t in JSON_TYPES):
        return Asked((base,))
    how = f"{size:,} bytes" if size is not None else "a body of unknown size"
    return Asked((replace(base, unreadable=f"{how}, over the {READ_MAX:,} a call is read up to"),))
