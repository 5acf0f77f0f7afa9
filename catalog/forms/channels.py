"""The canonical call over the door's other channels: a WebSocket, server-sent events, GraphQL, SSH.

Each wraps the same `{"tool": NAME, "args": {...}}`: the WebSocket sends its canonical JSON text as
one message to `ws://flightlog.local/api/dispatch` and reads the door's reply as one message; the SSE
form is the dispatch POST asking for `text/event-stream` (the reply comes as one `reply` event);
GraphQL posts `catalog.graphql_call`'s one operation with the call as its variables; SSH runs the
CLI form on the machine flightlog runs on. Every one reaches the same door, so the upstream gets the
same bytes. Without a lent token each reads FLIGHTLOG_TOKEN where it runs (SSH hands it over on
stdin, never on a command line another user could read).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Final

from catalog.forms.upstream import canonical_json
from catalog.graphql_call import request_body

GRAPHQL_PATH: Final = "/api/graphql"
EVENT_STREAM: Final = "text/event-stream"


def channel_forms(
    name: str,
    args: Mapping[str, Any],
    *,
    base: str,
    proxy: str,
    headers: Mapping[str, str],
    token: str | None,
    ssh_host: str,
) -> dict[str, Any]:
    """The websocket, sse, graphql and ssh forms of one canonical call; `headers` are the dispatch
    form's (content type and the bearer token, or `${FLIGHTLOG_TOKEN}`)."""
    call = {"tool": name, "args": dict(args)}
    root = base.rstrip("/")
    door = root + "/api/dispatch"
    return {
        "websocket": {
            "method": "CODE",
            "language": "javascript",
            "code": websocket_snippet(_ws_url(door), canonical_json(call), proxy, token),
        },
        "sse": {
            "method": "POST",
            "url": door,
            "headers": dict(headers) | {"accept": EVENT_STREAM},
            "body": call,
        },
        "graphql": {
            "method": "POST",
            "url": root + GRAPHQL_PATH,
            "headers": dict(headers),
            "body": request_body(call),
        },
        "ssh": {"method": "CLI", "command": ssh_command(ssh_host, name, args, token)},
    }


def _ws_url(door: str) -> str:
    return "ws" + door.removeprefix("http") if door.startswith("http") else door


def websocket_snippet(url: str, message: str, proxy: str, token: str | None) -> str:
    """Node with undici's WebSocket through the proxy: one message out, the door's reply back."""
    bearer = json.dumps(f"Bearer {token}") if token else '"Bearer " + process.env.FLIGHTLOG_TOKEN'
    return (
        "// Node 18+: npm install undici (its WebSocket takes a proxy and headers).\n"
        'import { ProxyAgent, WebSocket } from "undici";\n'
        "\n"
        f"const socket = new WebSocket({json.dumps(url)}, {{\n"
        f"  dispatcher: new ProxyAgent({json.dumps(proxy)}),\n"
        f"  headers: {{ authorization: {bearer} }},\n"
        "});\n"
        f"socket.onopen = () => socket.send({json.dumps(message)});\n"
        "socket.onmessage = (event) => {\n"
        "  console.log(event.data);\n"
        "  socket.close(1000);\n"
        "};\n"
        "socket.onerror = (event) => {\n"
        '  console.error(String(event.error ?? event.message ?? "the WebSocket failed"));\n'
        "  process.exitCode = 1;\n"
        "};\n"
    )


def ssh_command(host: str, name: str, args: Mapping[str, Any], token: str | None) -> str:
    """`ssh HOST 'flightlog call NAME --args JSON'`, the token handed over on stdin (the remote shell
    reads it into FLIGHTLOG_TOKEN), never on a command line: `printf` is the shell's own, and the
    remote command holds only the variable's name."""
    remote = shlex.join(["flightlog", "call", name, "--args", canonical_json(dict(args))])
    given = shlex.quote(token) if token else '"$FLIGHTLOG_TOKEN"'
    script = f'FLIGHTLOG_TOKEN="$(cat)"; export FLIGHTLOG_TOKEN; exec {remote}'
    return f"printf %s {given} | " + shlex.join(["ssh", host, script])
