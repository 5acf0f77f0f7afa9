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
TOKEN_ENV: Final = "FLIGHTLOG_TOKEN"
"""The environment variable a scoped token travels in: `flightlog run` sets it for its child and
`flightlog mcp` reads it; a form rendered without a token reads it where it runs."""
ENV_BEARER: Final = f"Bearer ${{{TOKEN_ENV}}}"
"""The header value of a form rendered without a token: `${FLIGHTLOG_TOKEN}` filled where it runs
(the shell expands it in curl; the snippets read the environment)."""


FORM_NOTES: Final = {
    "dispatch": "POST the canonical call to the proxy's dispatch door; a scoped token as a bearer header.",
    "dispatch_dry_run": "With ?dry_run=1: the door answers the exact upstream request and sends nothing.",
    "url": "The canonical call in one GET link: tool= and args= (canonical JSON), token= when lent.",
    "curl": "The dispatch form as one shell line, through the proxy.",
    "cli": "flightlog call NAME --args JSON: the same door, in process, recorded in the Ledger.",
    "cli_dry_run": "The CLI form with --dry-run: the exact upstream request, nothing sent.",
    "python": "The dispatch form as an httpx snippet, through the proxy.",
    "javascript": "The dispatch form as a fetch snippet (undici's ProxyAgent), through the proxy.",
    "mcp_stdio": 'The canonical call as the arguments of the "call" tool of `flightlog mcp`.',
    "mcp_http": 'The same "call" tool over MCP streamable HTTP at flightlog.local, through the proxy.',
    "mcp_config_claude_code": "Adds flightlog's MCP server to Claude Code.",
    "mcp_config_json": "The MCP server entry for clients configured with JSON (mcpServers).",
    "upstream": "The service's own call, arguments filled in; secrets stay [NAME] until the door sends it.",
}
"""What varies per form: where the call is sent, where the credential goes, how it is wrapped."""


def door_forms(
    name: str, args: Mapping[str, Any], *, base: str, proxy: str, token: str | None = None
) -> dict[str, Any]:
    """Every door form of one canonical call, in a fixed order.

    With a scoped `token`, each form that reaches the door over HTTP carries it (a bearer header,
    or `token=` in the one-line URL), the CLI forms pass `--token` and the MCP stdio configurations
    set FLIGHTLOG_TOKEN for the server. Without one, the HTTP forms read FLIGHTLOG_TOKEN where they
    run (what `flightlog run` sets for its child); `flightlog call` and `flightlog mcp` read it too.
    """
    call = {"tool": name, "args": dict(args)}
    body = canonical_json(call)
    door = base.rstrip("/") + DISPATCH_PATH
    headers = dict(JSON_HEADERS) | {"authorization": f"Bearer {token}" if token else ENV_BEARER}
    cli = ["flightlog", "call", name, "--args", _args(args)] + (["--token", token] if token else [])
    mcp_stdio: dict[str, Any] = {"command": "flightlog", "args": ["mcp"]}
    if token:
        mcp_stdio["env"] = {TOKEN_ENV: token}
    claude = ["claude", "mcp", "add", MCP_SERVER_NAME] + (["--env", f"{TOKEN_ENV}={token}"] if token else [])
    return {
        "dispatch": {"method": "POST", "url": door, "headers": headers, "body": call},
        "dispatch_dry_run": {
            "method": "POST",
            "url": door + "?dry_run=1",
            "headers": dict(headers),
            "body": call,
        },
        "url": {"method": "GET", "url": one_line_url(door, name, args, token)},
        "curl": {"method": "CLI", "command": curl_command(door, body, proxy, headers)},
        "cli": {"method": "CLI", "command": shlex.join(cli)},
        "cli_dry_run": {"method": "CLI", "command": shlex.join([*cli, "--dry-run"])},
        "python": {
            "method": "CODE",
            "language": "python",
            "code": python_snippet(door, body, proxy, headers),
        },
        "javascript": {
            "method": "CODE",
            "language": "javascript",
            "code": js_snippet(door, body, proxy, headers),
        },
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
            "headers": {k: v for k, v in headers.items() if k != "content-type"},
            "tool": MCP_CALL_TOOL,
            "arguments": call,
        },
        "mcp_config_claude_code": {
            "method": "CLI",
            "command": shlex.join([*claude, "--", "flightlog", "mcp"]),
        },
        "mcp_config_json": {
            "method": "CODE",
            "language": "json",
            "code": json.dumps({"mcpServers": {MCP_SERVER_NAME: mcp_stdio}}, indent=2),
        },
    }


def _args(args: Mapping[str, Any]) -> str:
    return canonical_json(dict(args))


def one_line_url(door: str, name: str, args: Mapping[str, Any], token: str | None = None) -> str:
    """`GET DOOR?tool=NAME&args=JSON[&token=T]`, the arguments' canonical JSON percent-encoded."""
    url = f"{door}?tool={quote(name, safe='')}&args={quote(_args(args), safe='')}"
    return url + (f"&token={quote(token, safe='')}" if token else "")


def curl_command(door: str, body: str, proxy: str, headers: Mapping[str, str] = JSON_HEADERS) -> str:
    """One shell line: curl through the proxy to the door with the canonical call as its body."""
    words = ["curl", "-sS", "--proxy", proxy, door]
    env_header = ""
    for key, value in headers.items():
        if value == ENV_BEARER:  # double-quoted, so the shell fills in the token where it runs
            env_header = f' -H "{key}: Bearer ${TOKEN_ENV}"'
            continue
        words += ["-H", f"{key}: {value}"]
    return shlex.join(words) + env_header + " " + shlex.join(["--data-binary", body])


def python_snippet(door: str, body: str, proxy: str, headers: Mapping[str, str] = JSON_HEADERS) -> str:
    """An httpx snippet that sends exactly the canonical call's bytes through the proxy."""
    shown = repr(dict(headers)).replace(repr(ENV_BEARER), f'"Bearer " + os.environ["{TOKEN_ENV}"]')
    return (
        ("import os\n\n" if shown != repr(dict(headers)) else "") + "import httpx\n"
        "\n"
        "response = httpx.post(\n"
        f"    {door!r},\n"
        f"    content={body!r}.encode(),\n"
        f"    headers={shown},\n"
        f"    proxy={proxy!r},\n"
        ")\n"
        "print(response.json())\n"
    )


def js_snippet(door: str, body: str, proxy: str, headers: Mapping[str, str] = JSON_HEADERS) -> str:
    """A fetch snippet (Node 18+ with `npm install undici`; in a browser, the system proxy applies).

    undici's ProxyAgent tunnels with CONNECT even to an http:// URL, so the proxy answers a CONNECT
    to flightlog.local itself.
    """
    return (
        "// Node 18+: npm install undici. In a browser: drop the import and `dispatcher`.\n"
        'import { fetch, ProxyAgent } from "undici";\n'
        "\n"
        f"const response = await fetch({json.dumps(door)}, {{\n"
        '  method: "POST",\n'
        f"  headers: {_js_headers(headers)},\n"
        f"  body: {json.dumps(body)},\n"
        f"  dispatcher: new ProxyAgent({json.dumps(proxy)}),\n"
        "});\n"
        "console.log(await response.json());\n"
    )


def _js_headers(headers: Mapping[str, str]) -> str:
    shown = json.dumps(dict(headers))
    return shown.replace(json.dumps(ENV_BEARER), f'"Bearer " + process.env.{TOKEN_ENV}')
