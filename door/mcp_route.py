"""`/api/mcp`: the Directory's agent API over MCP streamable HTTP, answered by the proxy itself.

The same `MCPServer` as `flightlog mcp` (catalog.mcp_server, the official SDK), its `call` tool
running rows through the proxy's door (door "mcp"), so the `mcp_http` contract form runs as written.
The SDK's Starlette app is stateless and answers in JSON; it runs on an event loop of its own in a
daemon thread, started on first use (the SDK's import is slow; the proxy does not pay it at start).
Each request is one ASGI call handed to that loop; its answer is collected whole.

Every request passes the gate first (`door.gatekeeper`, declared in
`door.declarations`): Host and Origin (and again by the SDK: only `flightlog.local`, no
browser origin but its own), then the write verbs need a token the gate admits for `write` on the
rows they change; reading the Directory needs none, as on its HTTP routes. The `call` tool is run
by the door here (not by the SDK), with the call's own token or the request's and the identity the
request claims; the door refuses and files what the token does not allow.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from door.callers import bearer
from door.declarations import UNREADABLE_CALL, mcp_message
from door.declarations import mcp_route as declared_mcp_route
from door.gatekeeper import call_head, identity_of
from door.routes import HOST, Answer, Handler, Headers, Query, Route, json_answer, lazy_route

if TYPE_CHECKING:
    from catalog.directory import Directory
    from door.http_face import Door

PATH = "/api/mcp"
TIMEOUT = 120.0
"""A dispatched call can take a while (an upstream has its own timeout, shorter); past this, 504."""


class _Server:
    """The SDK's ASGI app, its lifespan held open on a private loop in a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self._failed: BaseException | None = None

        async def hold() -> None:
            try:
                async with app.router.lifespan_context(app):
                    started.set()
                    await asyncio.Event().wait()
            except BaseException as e:  # reported to the first caller
                self._failed = e
                started.set()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(hold())

        threading.Thread(target=run, name="flightlog-mcp-http", daemon=True).start()
        started.wait(30)
        if self._failed is not None:
            raise RuntimeError(f"the MCP server did not start: {self._failed}")

    def call(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        future = asyncio.run_coroutine_threadsafe(self._asgi(method, path, query, headers, body), self.loop)
        return future.result(TIMEOUT)

    async def _asgi(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": urlencode(query, doseq=True).encode(),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
            "client": ("127.0.0.1", 0),
            "server": (HOST, 80),
        }
        pending = [{"type": "http.request", "body": body, "more_body": False}]
        done = asyncio.Event()
        status = 500
        out_headers: dict[str, str] = {}
        chunks: list[bytes] = []

        async def receive() -> Mapping[str, Any]:
            if pending:
                return pending.pop()
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: Mapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for key, value in message.get("headers", []):
                    out_headers[key.decode("latin-1")] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body"):
                    done.set()

        await self.app(scope, receive, send)
        done.set()
        return status, out_headers, b"".join(chunks)


def mcp_route(door: Callable[[], Door]) -> Route:
    """`/api/mcp` over the Directory the proxy serves; `door()` gives the proxy's one door."""

    def build() -> Handler:
        server = _Server(_app(door))
        return lambda method, path, query, headers, body: _handle(
            server.call, door, method, path, query, headers, body
        )

    return declared_mcp_route(lazy_route(build), lambda: _directory(door))


def _directory(door: Callable[[], Door]) -> Directory:
    directory = door().directory
    assert directory is not None, "the proxy's door always carries its Directory"
    return directory


def _handle(
    call: Handler,
    door: Callable[[], Door],
    method: str,
    path: str,
    query: Query,
    headers: Headers,
    body: bytes,
) -> Answer:
    """One request the gate let through (see the module docstring): the `call` tool is answered by
    the door here, with the request's token and identity; everything else by the SDK."""
    try:
        message = json.loads(body) if body else None
    except ValueError:
        return _refused(400, "call", "an MCP request body is one JSON-RPC message")
    if isinstance(message, list):
        return _refused(400, "call", "JSON-RPC batches are not accepted; send one message per request")
    tool, arguments = mcp_message(body)
    if tool == UNREADABLE_CALL:
        return _refused(400, "call", f"an MCP message the door cannot read for certain: {arguments}")
    if tool != "call":
        return call(method, path, query, headers, body)
    assert isinstance(message, dict)
    return _call_tool(door, message, arguments, headers)


def _call_tool(door: Callable[[], Door], message: dict[str, Any], arguments: Any, headers: Headers) -> Answer:
    """`tools/call` of `call`: checked against its schema, run through the door (door `mcp`) with the
    call's own token or the request's, filed under the identity the request claims."""
    # deferred: the door (httpx) and the catalog load on the first request
    from catalog.agent_tools import CALL_TOOL, check_arguments
    from catalog.errors import CatalogError

    try:
        checked = check_arguments(CALL_TOOL, arguments if isinstance(arguments, dict) else {})
    except CatalogError as e:
        return _result(message, str(e), failed=True)
    token = checked.get("token") or bearer(headers, {})
    call = {"tool": checked["tool"], "args": checked.get("args") or {}}
    head = call_head("POST", PATH, {}, headers)
    result = door().dispatcher.dispatch(
        call, door="mcp", token=token, identity=identity_of(headers), head=head
    )
    return _result(message, json.dumps(result.reply, ensure_ascii=False), failed=not result.reply.get("ok"))


def _result(message: dict[str, Any], text: str, *, failed: bool) -> Answer:
    """The JSON-RPC answer of a tool call: one text block, `isError` when it failed."""
    result = {"content": [{"type": "text", "text": text}], "isError": failed}
    return (
        200,
        {"content-type": "application/json"},
        json.dumps(
            {"jsonrpc": "2.0", "id": message.get("id"), "result": result}, ensure_ascii=False
        ).encode(),
    )


def _refused(status: int, limit: str, message: str) -> Answer:
    code, headers, body = json_answer(
        status, {"error": message, "refused": {"limit": limit, "message": message}}
    )
    return code, {**headers, "www-authenticate": 'Bearer realm="flightlog"'}, body


def _app(door: Callable[[], Door]) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    from catalog.mcp_server import build_server

    def dispatch(call: dict[str, Any], token: str | None) -> tuple[bool, str]:
        """The `call` tool: a canonical call through the proxy's door, recorded like any other."""
        result = door().dispatcher.dispatch(call, door="mcp", token=token)
        return bool(result.reply.get("ok")), json.dumps(result.reply, ensure_ascii=False)

    directory = door().directory
    assert directory is not None, "the proxy's door always carries its Directory"
    server = build_server(directory, dispatch=dispatch, authorize=None)  # the route judged each request
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[HOST, f"{HOST}:*"],
        allowed_origins=[f"http://{HOST}", f"https://{HOST}"],
    )
    return server.streamable_http_app(
        streamable_http_path=PATH, json_response=True, stateless_http=True, transport_security=security
    )
