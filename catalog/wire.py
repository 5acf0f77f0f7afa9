"""The exact bytes a rendered upstream request is sent as: one builder for the door, its dry run and the join.

`wire(request)` builds the httpx request for a rendered `{method, url, headers, body}` and gives the head
bytes h11 writes for it (start line in origin form, then the header fields in order, CRLF-separated)
and the body. An MCP-over-HTTP contract is the three requests of `mcp_requests`; a CLI contract is the
line `CLI <argv>` with its stdin as body.

Bodies are serialised deterministically: a JSON value as `json.dumps(value, separators=(",", ":"),
ensure_ascii=False)` in UTF-8, text as UTF-8, nothing as no body (`catalog.contracts` already renders
bodies as text this way).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Final

import httpx

from storage.heads import build_head

MCP_PROTOCOL: Final = "2025-06-18"
MCP_ACCEPT: Final = "application/json, text/event-stream"


def body_bytes(body: Any) -> bytes:
    """A contract body as the bytes sent (see the module docstring for the serialisation)."""
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build(request: Mapping[str, Any]) -> httpx.Request:
    """The httpx request for a rendered `{method, url, headers, body}` (headers kept in order).

    A JSON body without a content-type header gets `content-type: application/json`.
    """
    headers = [(str(k), str(v)) for k, v in (request.get("headers") or {}).items()]
    body = request.get("body")
    content = body_bytes(body)
    if (
        body is not None
        and not isinstance(body, str | bytes)
        and not any(k.lower() == "content-type" for k, _ in headers)
    ):
        headers.append(("content-type", "application/json"))
    return httpx.Request(
        str(request["method"]).upper(), str(request["url"]), headers=headers, content=content
    )


def head_of(request: httpx.Request) -> bytes:
    """The exact head h11 writes for `request`: start line and header fields, CRLF-separated."""
    start = (request.method.encode("ascii"), request.url.raw_path, b"HTTP/1.1")
    return build_head(start, request.headers.raw)


def wire(request: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """The exact (head, body) bytes a rendered request is sent as."""
    built = build(request)
    return head_of(built), built.content


def mcp_requests(contract: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The HTTP requests of an MCP-over-HTTP call: initialize, initialized, tools/call.

    The session id the server assigns is filled into the later requests by `call_mcp` as it goes;
    the dry run shows them with `Mcp-Session-Id: [session]`.
    """
    url = str(contract["server"]["url"])
    base = {str(k): str(v) for k, v in (contract.get("headers") or {}).items()}
    base.update({"accept": MCP_ACCEPT})
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "flightlog-dispatch", "version": "1"},
        },
    }
    later = {**base, "mcp-protocol-version": MCP_PROTOCOL}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": contract["tool"], "arguments": contract.get("arguments") or {}},
    }
    return [
        {"method": "POST", "url": url, "headers": base, "body": init},
        {"method": "POST", "url": url, "headers": later, "body": done},
        {"method": "POST", "url": url, "headers": later, "body": call},
    ]


def cli_argv(contract: Mapping[str, Any]) -> list[str]:
    """A CLI contract's command as an argument vector (a string is split the way a shell would)."""
    command = contract["command"]
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def cli_head(argv: list[str]) -> bytes:
    """The head line a command is recorded under."""
    return b"CLI " + shlex.join(argv).encode("utf-8")


def expected(request: Mapping[str, Any]) -> list[tuple[bytes, bytes]]:
    """Every (head, body) a rendered, bound contract part is sent as, in order."""
    method = str(request.get("method", "")).upper()
    if method == "MCP":
        return [wire(r) for r in mcp_requests(request)]
    if method == "CLI":
        return [(cli_head(cli_argv(request)), body_bytes(request.get("stdin")))]
    return [wire(request)]
