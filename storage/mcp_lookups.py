"""The reads of recorded MCP messages the join (catalog) and readback (addons) need, as plain rows.

Beside `storage.lookups` (all SQL over the Ledger's tables lives in storage): a tool's recorded MCP
calls and results, the stdio sessions' initialize results (the server's announced name), and the
events that share a call's key (`action_id` on stdio, `parent` over HTTP).
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy.engine import Engine

from storage.events import StoredEvent
from storage.kinds import MCP_INITIALIZE_RESULT, MCP_TOOL_CALL, MCP_TOOL_RESULT
from storage.lookups import read_rows
from storage.rows import from_mapping

MCP_COLUMNS: Final = (
    "event_id, action_id, parent, kind, direction, at, url, tool, session, agent, error, seq, status,"
    " payload_sha256"
)


def mcp_tool_rows(engine: Engine, tool: str, limit: int) -> list[dict[str, Any]]:
    """The `mcp.tools/call` events naming `tool` and their results, oldest first."""
    sql = (
        f"SELECT {MCP_COLUMNS} FROM events WHERE tool = :tool AND kind IN (:call, :result)"
        " ORDER BY at, seq, event_id LIMIT :n"
    )
    return read_rows(engine, sql, tool=tool, call=MCP_TOOL_CALL, result=MCP_TOOL_RESULT, n=limit)


def stdio_initialize_results(engine: Engine) -> list[dict[str, Any]]:
    """Each recorded stdio session's initialize result: its event id and payload address."""
    sql = "SELECT event_id, payload_sha256 FROM events WHERE kind = :k AND url LIKE 'stdio:%'"
    return read_rows(engine, sql, k=MCP_INITIALIZE_RESULT)


def sharing_call(engine: Engine, key: str, over_http: bool) -> list[str]:
    """The ids of the events of one MCP call: those whose `parent` (HTTP) or `action_id` (stdio) is
    `key`, in recorded order."""
    column = "parent" if over_http else "action_id"
    sql = f"SELECT event_id FROM events WHERE {column} = :v ORDER BY at, seq, event_id"
    return [r["event_id"] for r in read_rows(engine, sql, v=key)]


def call_events(engine: Engine, key: str, limit: int = 100) -> list[StoredEvent]:
    """The message events of one MCP call through the proxy (its `parent` is `key`), whole, in
    recorded order: the call and its result, which may sit under another exchange."""
    sql = "SELECT * FROM events WHERE parent = :v ORDER BY at, seq, event_id LIMIT :n"
    return [from_mapping(r) for r in read_rows(engine, sql, v=key, n=limit)]
