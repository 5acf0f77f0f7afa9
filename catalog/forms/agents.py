"""The forms agents and their frameworks consume: tool definitions and MCP client configurations.

A model is handed a tool as its vendor's definition JSON; a client is pointed at flightlog's MCP
server by its own configuration file. Both are derived from the same row and the same canonical
call: a model that calls the OpenAI or Anthropic definition produces `{name, arguments}`, which is
`{"tool": NAME, "args": arguments}` for the door (`canonical_from_tool_call`).

The MCP configurations start `flightlog mcp` (stdio) with `FLIGHTLOG_HOME` (where the Directory,
Ledger, keys and tokens are) and the running proxy's address as `HTTP_PROXY`/`HTTPS_PROXY`, so what
else that process reaches is recorded. The door itself never goes through the proxy (its client
ignores the environment), so nothing is stored twice.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any, Final

MCP_SERVER_NAME: Final = "flightlog"
MCP_SERVERS_FILES: Final = (".mcp.json", ".cursor/mcp.json", "~/.cursor/mcp.json")
"""Where the `mcpServers` JSON goes: a project's `.mcp.json` (Claude Code), Cursor's project and user
files; Claude Desktop and most other clients take the same object in their own settings."""
NAME_MAX: Final = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def function_name(name: str) -> str:
    """The tool's name as the vendors allow it (`^[A-Za-z0-9_-]{1,64}$`): other characters become `_`."""
    return _UNSAFE.sub("_", name)[:NAME_MAX] or "tool"


def parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments' JSON Schema as a definition's parameters: always an object schema."""
    out = dict(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    return out


def definition_forms(name: str, description: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI chat-completions and Responses tool JSON, and Anthropic tool JSON, for one row.

    `strict` is false for the Responses API (its default is true, which demands every property be
    required and no other allowed: a row's schema is taken as written, not rewritten to fit)."""
    fn, params = function_name(name), parameters(schema)
    return {
        "openai_tool": _file(
            (),
            {"type": "function", "function": {"name": fn, "description": description, "parameters": params}},
        ),
        "openai_responses_tool": _file(
            (),
            {
                "type": "function",
                "name": fn,
                "description": description,
                "parameters": params,
                "strict": False,
            },
        ),
        "anthropic_tool": _file((), {"name": fn, "description": description, "input_schema": params}),
    }


def server_env(home: str | None, proxy: str, token: str | None = None) -> dict[str, str]:
    """The environment `flightlog mcp` is started with by every client configuration: a scoped token,
    when one is lent, in FLIGHTLOG_TOKEN (the server's `call` tool spends only that)."""
    env = {"FLIGHTLOG_HOME": home} if home else {}
    env |= {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy}
    return env | ({"FLIGHTLOG_TOKEN": token} if token else {})


def config_forms(home: str | None, proxy: str, token: str | None = None) -> dict[str, Any]:
    """Claude Code's `claude mcp add ...` line, the `mcpServers` JSON (Claude Code's `.mcp.json`,
    Cursor's, most clients'), and VS Code's `servers` JSON."""
    env = server_env(home, proxy, token)
    stdio = {"command": "flightlog", "args": ["mcp"], "env": env}
    add = ["claude", "mcp", "add", "--scope", "project", MCP_SERVER_NAME]
    for key, value in env.items():
        add += ["-e", f"{key}={value}"]
    servers = {"mcpServers": {MCP_SERVER_NAME: stdio}}
    vscode = {"servers": {MCP_SERVER_NAME: {"type": "stdio", **stdio}}}
    return {
        "mcp_config_claude_code": {"method": "CLI", "command": shlex.join([*add, "--", "flightlog", "mcp"])},
        "mcp_config_json": _file(MCP_SERVERS_FILES, servers),
        "mcp_config_vscode": _file((".vscode/mcp.json",), vscode),
    }


def _file(paths: tuple[str, ...], content: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON file's content, with the files that take it as written (`paths`: several clients read
    the same `mcpServers` object, each from its own file)."""
    form: dict[str, Any] = {"method": "CODE", "language": "json", "code": json.dumps(content, indent=2)}
    return form | ({"paths": list(paths)} if paths else {})


def canonical_from_tool_call(name: str, arguments: str | Mapping[str, Any], tool: str) -> dict[str, Any]:
    """A model's tool call (`name`, `arguments` as JSON text or an object) as the canonical call for
    the row `tool` whose definition it called; a call to another name is refused."""
    if name != function_name(tool):
        raise ValueError(f"the model called {name!r}, not {function_name(tool)!r}")
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    return {"tool": tool, "args": args}
