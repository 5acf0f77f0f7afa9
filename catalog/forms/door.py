"""The forms that reach a tool through flightlog's own doors, each derived from the canonical call.

Every form here wraps the same canonical call `{"tool": NAME, "args": {...}}`; only where it is sent
(the dispatch door, a one-line URL, the command line, MCP over stdio or HTTP), where the credential
goes and how the name and arguments are wrapped vary. The request body every HTTP form sends is the
canonical JSON text of the call (`canonical_json`), so all of them reach the door as the same bytes.

A form's `body` that is a string is sent as written; any other JSON value is sent as its canonical
JSON text.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from catalog.forms.upstream import canonical_json

DEFAULT_BASE: Final = "http://flightlog.local"
DEFAULT_PROXY: Final = "http://127.0.0.1:8080"
DISPATCH_PATH: Final = "/api/dispatch"
MCP_HTTP_PATH: Final = "/api/mcp"
MCP_CALL_TOOL: Final = "call"
"""The one MCP tool of flightlog's MCP server that takes a canonical call as its arguments."""
MCP_SERVER_NAME: Final = "flightlog"
JSON_HEADERS: Final = {"content-type": "application/json"}


def door_forms(name: str, args: Mapping[str, Any], *, base: str, proxy: str) -> dict[str, Any]:
    """Every door form of one canonical call, in a fixed order."""
    call = {"tool": name, "args": dict(args)}
    body = canonical_json(call)
    door = base.rstrip("/") + DISPATCH_PATH
    mcp_stdio = {"command": "flightlog", "args": ["mcp"]}
    return {
        "dispatch": {"method": "POST", "url": door, "headers": dict(JSON_HEADERS), "body": call},
        "dispatch_dry_run": {
            "method": "POST",
            "url": door + "?dry_run=1",
            "headers": dict(JSON_HEADERS),
            "body": call,
        },
        "url": {"method": "GET", "url": one_line_url(door, name, args)},
        "curl": {"method": "CLI", "command": curl_command(door, body, proxy)},
        "cli": {"method": "CLI", "command": shlex.join(["flightlog", "call", name, "--args", _args(args)])},
        "cli_dry_run": {
            "method": "CLI",
            "command": shlex.join(["flightlog", "call", name, "--args", _args(args), "--dry-run"]),
        },
        "python": {"method": "CODE", "language": "python", "code": python_snippet(door, body, proxy)},
        "javascript": {"method": "CODE", "language": "javascript", "code": js_snippet(door, body, proxy)},
        "mcp_stdio": {
            "method": "MCP",
            "server": mcp_stdio,
            "headers": {},
            "tool": MCP_CALL_TOOL,
            "arguments": call,
        },
        "mcp_http": {
            "method": "MCP",
            "server": {"url": base.rstrip("/") + MCP_HTTP_PATH, "proxy": proxy},
            "headers": {},
            "tool": MCP_CALL_TOOL,
            "arguments": call,
        },
        "mcp_config_claude_code": {
            "method": "CLI",
            "command": shlex.join(["claude", "mcp", "add", MCP_SERVER_NAME, "--", "flightlog", "mcp"]),
        },
        "mcp_config_json": {
            "method": "CODE",
            "language": "json",
            "code": json.dumps({"mcpServers": {MCP_SERVER_NAME: mcp_stdio}}, indent=2),
        },
    }


def _args(args: Mapping[str, Any]) -> str:
    return canonical_json(dict(args))


def one_line_url(door: str, name: str, args: Mapping[str, Any]) -> str:
    """`GET DOOR?tool=NAME&args=JSON`, the arguments' canonical JSON percent-encoded."""
    return f"{door}?tool={quote(name, safe='')}&args={quote(_args(args), safe='')}"


def curl_command(door: str, body: str, proxy: str) -> str:
    """One shell line: curl through the proxy to the door with the canonical call as its body."""
    return shlex.join(
        ["curl", "-sS", "--proxy", proxy, door, "-H", "content-type: application/json", "--data-binary", body]
    )


def python_snippet(door: str, body: str, proxy: str) -> str:
    """An httpx snippet that sends exactly the canonical call's bytes through the proxy."""
    return (
        "import httpx\n"
        "\n"
        "response = httpx.post(\n"
        f"    {door!r},\n"
        f"    content={body!r}.encode(),\n"
        '    headers={"content-type": "application/json"},\n'
        f"    proxy={proxy!r},\n"
        ")\n"
        "print(response.json())\n"
    )


def js_snippet(door: str, body: str, proxy: str) -> str:
    """A fetch snippet (Node 18+ with `npm install undici`; in a browser, the system proxy applies)."""
    return (
        "// Node 18+: npm install undici. In a browser: drop the import and `dispatcher`.\n"
        'import { fetch, ProxyAgent } from "undici";\n'
        "\n"
        f"const response = await fetch({json.dumps(door)}, {{\n"
        '  method: "POST",\n'
        '  headers: { "content-type": "application/json" },\n'
        f"  body: {json.dumps(body)},\n"
        f"  dispatcher: new ProxyAgent({json.dumps(proxy)}),\n"
        "});\n"
        "console.log(await response.json());\n"
    )
