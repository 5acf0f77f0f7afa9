"""The join between MCP tool rows and the MCP calls the Ledger recorded (stdio and over HTTP).

A row imported with `flightlog directory import mcp COMMAND` carries its server: `upstream.server`
holds the command (or the URL) and the identity the server gave (`name`, `version` of its
`serverInfo`). A recorded call is the event kind `mcp.tools/call` whose `tool` is the server's tool
name; it belongs to the row when

- stdio (`flightlog mcp-record`): the event's `url` is `stdio:` and the row's command line
  (`stdio_identity`), or the row's server `name` is the one the recorded session's server announced;
- HTTP through the proxy: the event's `url` starts with the row's server `url`.

Each call is paired with its result (same `action_id` on stdio, same `parent` over HTTP) and its
arguments are checked against the row's schema: a call that does not fit is flagged, with why. The
reads are `storage.mcp_lookups`; the kinds, `storage.kinds`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from sqlalchemy.engine import Engine

from catalog.forms.recorded_mcp import mcp_upstream
from catalog.tool import Tool
from storage.kinds import MCP_TOOL_CALL, MCP_TOOL_RESULT
from storage.mcp_lookups import mcp_tool_rows

CALL: Final = MCP_TOOL_CALL
RESULT: Final = MCP_TOOL_RESULT

ReadArguments = Callable[[dict[str, Any]], Any]
"""Gives a recorded call's `arguments` (from its payload or the exchange's bytes it points into)."""


def stdio_identity(server: Mapping[str, Any]) -> str | None:
    """The `url` every event of a stdio session with this server's command has."""
    command = server.get("command")
    if not isinstance(command, str) or not command:
        return None
    return "stdio:" + shlex.join([command, *[str(a) for a in server.get("args") or []]])


def is_mcp_row(tool: Tool) -> bool:
    """Whether a row's upstream is one MCP call."""
    return mcp_upstream(tool.upstream) is not None


@dataclass
class RecordedCall:
    """One recorded call of a row's tool, its result, and whether its arguments fit the row."""

    call: dict[str, Any]
    result: dict[str, Any] | None
    arguments: Any
    mismatch: str = ""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "result": self.result,
            "arguments": self.arguments,
            "mismatch": self.mismatch,
        }


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if out.get("at") is not None and not isinstance(out["at"], str):
        out["at"] = out["at"].isoformat()
    return out


def argument_mismatch(tool: Tool, arguments: Any) -> str:
    """Why `arguments` do not fit the row's schema ("" when they do)."""
    if not isinstance(arguments, Mapping):
        return f"the arguments are not an object ({type(arguments).__name__})"
    error = best_match(Draft202012Validator(dict(tool.args_schema)).iter_errors(dict(arguments)))
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def recorded_calls(
    engine: Engine,
    tool: Tool,
    read_arguments: ReadArguments,
    *,
    server_names: Mapping[str, str] | None = None,
    limit: int = 1000,
) -> list[RecordedCall]:
    """Every recorded call of an MCP row's tool, oldest first, each with its result and the check.

    `server_names` maps a stdio session prefix (`mcp:SESSION`) to the name its server announced, so
    a row whose command line differs from the wrapped one still finds its calls by the server's name.
    """
    upstream = mcp_upstream(tool.upstream) or {}
    server = upstream.get("server") or {}
    identity, url, name = stdio_identity(server), server.get("url"), server.get("name")
    rows = [_plain(r) for r in mcp_tool_rows(engine, str(upstream.get("tool")), limit * 2)]

    def belongs(row: dict[str, Any]) -> bool:
        where = row.get("url") or ""
        if identity is not None and where == identity:
            return True
        if isinstance(url, str) and url and where.startswith(url.rstrip("/")):
            return True
        session = row["event_id"].rsplit(":", 2)[0]
        return bool(name) and (server_names or {}).get(session) == name

    mine = [r for r in rows if belongs(r)]
    results = {_pair_key(r): r for r in mine if r["kind"] == RESULT}
    out = []
    for row in (r for r in mine if r["kind"] == CALL):
        arguments = read_arguments(row)
        found = RecordedCall(row, results.get(_pair_key(row)), arguments, argument_mismatch(tool, arguments))
        out.append(found)
    return out[:limit]


def _pair_key(row: Mapping[str, Any]) -> str:
    """What a call and its result share: `parent` over HTTP, `action_id` on stdio."""
    return str(row.get("parent") or row["action_id"])


def row_for_call(event: Mapping[str, Any], rows: list[Tool], server_name: str | None = None) -> Tool | None:
    """From a recorded call to its row: the MCP row of that server with that tool, if any."""
    for tool in rows:
        upstream = mcp_upstream(tool.upstream)
        if upstream is None:
            continue
        server = upstream.get("server") or {}
        if upstream.get("tool") != event.get("tool"):
            continue
        where = event.get("url") or ""
        url = server.get("url")
        if where == stdio_identity(server) or (isinstance(url, str) and url and where.startswith(url)):
            return tool
        if server_name and server.get("name") == server_name:
            return tool
    return None


def arguments_of(message: bytes) -> Any:
    """A tools/call message's `params.arguments` (None when the message does not say)."""
    try:
        value = json.loads(message)
    except ValueError:
        return None
    params = value.get("params") if isinstance(value, dict) else None
    return params.get("arguments", {}) if isinstance(params, dict) else None
