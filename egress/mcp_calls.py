"""MCP `tools/call` requests found in a JSON-RPC body (HTTP or a stdio line), for the policy to judge.

Only what a rule can name is read: each call's JSON-RPC id (as sent, to answer it), the tool's name
and its arguments. A body that is not JSON-RPC gives None; one that is but holds no `tools/call`
gives an empty list. Batches (a JSON array, MCP before 2025-06-18) give one entry per call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

MAX_BODY: Final = 8 * 1024 * 1024
"""Larger bodies are not parsed (the proxy does not read bodies over 8 MiB either)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One `tools/call`: its id as sent (None for a notification), the tool and its arguments."""

    id: Any
    name: str
    arguments: Any


def tool_calls(body: bytes | None) -> list[ToolCall] | None:
    """The `tools/call`s in `body`, or None when it is not JSON-RPC."""
    if not body or len(body) > MAX_BODY or body.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    messages = data if isinstance(data, list) else [data]
    if not messages or not all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in messages):
        return None
    out = []
    for message in messages:
        if message.get("method") != "tools/call":
            continue
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        name = params.get("name")
        out.append(
            ToolCall(message.get("id"), name if isinstance(name, str) else "", params.get("arguments"))
        )
    return out
