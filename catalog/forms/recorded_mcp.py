"""The wrapped configuration of a stdio MCP server row: the client starts `flightlog mcp-record`,
which starts the server and records every message (DESIGN.md: `flightlog mcp-record -- COMMAND`).

One form per client, each pasteable as it is: Claude Code (`claude mcp add NAME -- ...`), Cursor
(`.cursor/mcp.json` or `~/.cursor/mcp.json`, key `mcpServers`) and VS Code (`.vscode/mcp.json`, key
`servers`, `type: stdio`). Each passes `--agent` naming the client, so the Ledger says who called.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Final

RECORDED_FORM_NAMES: Final = ("recorded_claude_code", "recorded_cursor", "recorded_vscode")
RECORDED_FORM_NOTES: Final = {
    "recorded_claude_code": "Adds the server to Claude Code, behind flightlog mcp-record.",
    "recorded_cursor": "The server's entry for Cursor's mcp.json, behind flightlog mcp-record.",
    "recorded_vscode": "The server's entry for VS Code's .vscode/mcp.json, behind flightlog mcp-record.",
}
AGENTS: Final = {
    "recorded_claude_code": "claude-code",
    "recorded_cursor": "cursor",
    "recorded_vscode": "vscode",
}


def mcp_upstream(upstream: Any) -> dict[str, Any] | None:
    """A row's upstream contract when it is one MCP call (not an array of calls), else None."""
    if isinstance(upstream, dict) and upstream.get("method") == "MCP":
        return upstream
    return None


def server_label(server: Mapping[str, Any]) -> str:
    """A short name for the client's configuration: the announced name, else the program's."""
    name = str(server.get("name") or PurePath(str(server.get("command") or "server")).stem)
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name.rsplit("/", 1)[-1]).strip("-") or "server"


def wrapped_args(server: Mapping[str, Any], agent: str) -> list[str]:
    """`mcp-record --agent AGENT -- COMMAND ARGS...` as the arguments of `flightlog`."""
    command = [str(server["command"]), *[str(a) for a in server.get("args") or []]]
    return ["mcp-record", "--agent", agent, "--", *command]


def recorded_forms(server: Mapping[str, Any]) -> dict[str, Any]:
    """The three wrapped configurations of a server started by a command (none for a URL server)."""
    if not isinstance(server.get("command"), str) or not server.get("command"):
        return {}
    label = server_label(server)
    claude = [
        "claude",
        "mcp",
        "add",
        label,
        "--",
        "flightlog",
        *wrapped_args(server, AGENTS["recorded_claude_code"]),
    ]
    cursor = {
        "mcpServers": {
            label: {"command": "flightlog", "args": wrapped_args(server, AGENTS["recorded_cursor"])}
        }
    }
    vscode = {
        "servers": {
            label: {
                "type": "stdio",
                "command": "flightlog",
                "args": wrapped_args(server, AGENTS["recorded_vscode"]),
            }
        }
    }
    return {
        "recorded_claude_code": {"method": "CLI", "command": shlex.join(claude)},
        "recorded_cursor": {"method": "CODE", "language": "json", "code": json.dumps(cursor, indent=2)},
        "recorded_vscode": {"method": "CODE", "language": "json", "code": json.dumps(vscode, indent=2)},
    }
