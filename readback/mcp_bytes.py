"""Reading back a recorded MCP message: its own payload (stdio), or its place in an exchange (HTTP).

A stdio message event keeps its line as its payload. A message derived from an exchange through the
proxy is an `artifact` whose id `EXCHANGE_EVENT:mcp:N` points at the Nth message of that exchange
event's payload (`recording.mcp.http_messages`); this module follows the pointer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from recording.mcp.http_messages import message_at
from storage.ledger import Ledger
from storage.mcp_lookups import stdio_initialize_results

POINTER = ":mcp:"


def message_bytes(ledger: Ledger, event: Mapping[str, Any]) -> bytes | None:
    """The message's bytes as stored (secrets replaced), or None when they were not kept."""
    sha = event.get("payload_sha256")
    if sha:
        return ledger.payload(sha)
    event_id = str(event["event_id"])
    if POINTER not in event_id:
        return None
    exchange_id, n = event_id.rsplit(POINTER, 1)
    found = list(ledger.events([exchange_id]))
    if not found or not found[0].payload_sha256 or not n.isdigit():
        return None
    try:
        return message_at(ledger.payload(found[0].payload_sha256), found[0].head, int(n))
    except (IndexError, ValueError):
        return None


def session_servers(ledger: Ledger) -> dict[str, str]:
    """`mcp:SESSION` -> the server name each recorded stdio session's server announced."""
    out = {}
    for row in stdio_initialize_results(ledger.engine):
        event_id, sha = row["event_id"], row["payload_sha256"]
        if not sha:
            continue
        try:
            info = json.loads(ledger.payload(sha)).get("result", {}).get("serverInfo", {})
        except (ValueError, AttributeError):
            continue
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            out[event_id.rsplit(":", 2)[0]] = info["name"]
    return out
