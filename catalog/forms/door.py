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
DEFAULT_SSH_HOST: Final = "localhost"
"""The machine the `ssh` form runs `flightlog call` on (`flightlog contracts --ssh-host` names another)."""
DISPATCH_PATH: Final = "/api/dispatch"
MCP_HTTP_PATH: Final = "/api/mcp"
MCP_CALL_TOOL: Final = "call"
"""The one MCP tool of flightlog's MCP server that takes a canonical call as its arguments."""
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
    "python": "The dispatch form as an httpx snippet, through the proxy.",
    "javascript": "The dispatch form as a fetch snippet (undici's ProxyAgent), through the proxy.",
    "mcp_stdio": 'The canonical call as the arguments of the "call" tool of `flightlog mcp`.',
    "mcp_http": 'The same "call" tool over MCP streamable HTTP at flightlog.local, through the proxy.',
    "wget": "The dispatch form as a wget line, through the proxy (the second command-line client).",
    "python_mcp": 'The "call" tool of `flightlog mcp` from Python, with the official MCP client.',
    "webhook": "What a webhook sender POSTs: the canonical call to the door, a scoped token in the URL.",
    "apple_shortcut": "An Apple Shortcut: a Text action holding the call, Get Contents of URL POSTing it.",
    "sdk": "flightlog.client's Flightlog: client.tools.NAME(**args) through the proxy.",
    "function": "flightlog.call(NAME, args): the door in this Python process, recorded like the CLI.",
    "websocket": "The call as one WebSocket message to ws://flightlog.local/api/dispatch; one reply back.",
    "sse": "The dispatch form asking for text/event-stream: the reply arrives as one `reply` event.",
    "graphql": "mutation Call($tool, $args) { call(tool, args) } at /api/graphql, the call as its variables.",
    "ssh": "The CLI form run over SSH on flightlog's machine; the token goes over stdin.",
    "mcp_jsonrpc": 'One JSON-RPC tools/call of the "call" tool, POSTed to the MCP endpoint (stateless).',
    "mcp_config_claude_code": "Adds flightlog's MCP server to Claude Code (FLIGHTLOG_HOME and the proxy).",
    "mcp_config_json": "The same server as mcpServers JSON (Claude Code's .mcp.json, Cursor's mcp.json).",
    "mcp_config_vscode": "The same server in VS Code's .vscode/mcp.json (servers, type stdio).",
    "openai_tool": "The row as an OpenAI chat-completions tool; a tool call's arguments are the args.",
    "openai_responses_tool": "The row as an OpenAI Responses API function tool.",
    "anthropic_tool": "The row as an Anthropic Messages tool (input_schema).",
    "link": "A scoped token's credential-free link: the call and its limits in one URL, no other key.",
    "link_curl": "The link fetched with curl, through the proxy.",
    "link_markdown": "The link as Markdown a person can click (through a browser set to the proxy).",
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
    }


def more_forms(
    name: str, args: Mapping[str, Any], *, base: str, proxy: str, token: str | None = None
) -> dict[str, Any]:
    """A second command-line client, MCP from Python and as one JSON-RPC POST, and the webhook."""
    call = {"tool": name, "args": dict(args)}
    body = canonical_json(call)
    door = base.rstrip("/") + DISPATCH_PATH
    auth = {"authorization": f"Bearer {token}" if token else ENV_BEARER}
    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": MCP_CALL_TOOL, "arguments": call},
    }
    hook = door + (f"?token={quote(token, safe='')}" if token else "")
    return {
        "wget": {"method": "CLI", "command": wget_command(door, body, proxy, dict(JSON_HEADERS) | auth)},
        "python_mcp": {"method": "CODE", "language": "python", "code": python_mcp_snippet(call)},
        "webhook": {"method": "POST", "url": hook, "headers": dict(JSON_HEADERS), "body": call},
        "mcp_jsonrpc": {
            "method": "POST",
            "url": base.rstrip("/") + MCP_HTTP_PATH,
            "headers": dict(JSON_HEADERS) | {"accept": "application/json, text/event-stream"} | auth,
            "body": rpc,
        },
    }


def link_forms(name: str, args: Mapping[str, Any], *, base: str, proxy: str, token: str) -> dict[str, Any]:
    """A lent token's credential-free forms: the link, the link with curl, the link in Markdown."""
    link = one_line_url(base.rstrip("/") + DISPATCH_PATH, name, args, token)
    return {
        "link": {"method": "GET", "url": link},
        "link_curl": {"method": "CLI", "command": shlex.join(["curl", "-sS", "--proxy", proxy, link])},
        "link_markdown": {"method": "CODE", "language": "markdown", "code": f"[Run {name}]({link})"},
    }


def wget_command(door: str, body: str, proxy: str, headers: Mapping[str, str]) -> str:
    """One shell line: wget through the proxy (its `-e` settings, as wget reads no --proxy flag);
    `--content-on-error` prints a refusal's JSON as the door answered it."""
    words = [
        "wget",
        "-q",
        "--content-on-error",
        "-O",
        "-",
        "-e",
        "use_proxy=yes",
        "-e",
        f"http_proxy={proxy}",
    ]
    env_header = ""
    for key, value in headers.items():
        if value == ENV_BEARER:  # double-quoted, so the shell fills in the token where it runs
            env_header = f' "--header={key}: Bearer ${TOKEN_ENV}"'
            continue
        words.append(f"--header={key}: {value}")
    return shlex.join(words) + env_header + " " + shlex.join([f"--post-data={body}", door])


def python_mcp_snippet(call: Mapping[str, Any]) -> str:
    """The official MCP client over stdio, calling the "call" tool with the canonical call (the
    server inherits this environment: the SDK passes only a few variables unless told)."""
    return (
        "import os\n"
        "\n"
        "import anyio\n"
        "from mcp import ClientSession, StdioServerParameters\n"
        "from mcp.client.stdio import stdio_client\n"
        "\n"
        "\n"
        "async def main() -> None:\n"
        '    server = StdioServerParameters(command="flightlog", args=["mcp"], env=dict(os.environ))\n'
        "    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:\n"
        "        await session.initialize()\n"
        f"        result = await session.call_tool({MCP_CALL_TOOL!r}, {dict(call)!r})\n"
        "        print(result.content[0].text)\n"
        "\n"
        "\n"
        "anyio.run(main)\n"
    )


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
        "print(response.text)\n"
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
        "console.log(JSON.stringify(await response.json()));\n"
    )


def _js_headers(headers: Mapping[str, str]) -> str:
    shown = json.dumps(dict(headers))
    return shown.replace(json.dumps(ENV_BEARER), f'"Bearer " + process.env.{TOKEN_ENV}')
