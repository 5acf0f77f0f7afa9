"""`/api/mcp`: the Directory's agent API over MCP streamable HTTP, answered by the proxy itself.

The same `MCPServer` as `flightlog mcp` (catalog.mcp_server, the official SDK), its `call` tool
running rows through the proxy's door (door "mcp"), so the `mcp_http` contract form runs as written.
The SDK's Starlette app is stateless and answers in JSON; it runs on an event loop of its own in a
daemon thread, started on first use (the SDK's import costs ~0.7 s the proxy does not pay at start).
Each request is one ASGI call handed to that loop; its answer is collected whole.

Host and Origin are checked here (`addons.door.authority`) and again by the SDK: only
`flightlog.local` and no browser origin other than its own, so a page a proxied browser opens
cannot drive the Directory. Every request needs a scoped token (`Authorization: Bearer flt_...`):
the write verbs one granting `write`; the `call` tool runs with the header's token unless the call
names its own, through the door, which refuses and records what the token does not allow.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from addons.door.authority import WRITES, bearer, browser_refusal
from addons.door.routes import HOST, Answer, Handler, Headers, Query, json_answer, lazy_route

if TYPE_CHECKING:
    from addons.door.http_face import Door

PATH = "/api/mcp"
TIMEOUT = 120.0
"""A dispatched call can take a while (an upstream's own timeout is 30 s); past this, 504."""


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


def mcp_route(door: Callable[[], Door]) -> Handler:
    """`/api/mcp` over the Directory the proxy serves; `door()` gives the proxy's one door."""

    def build() -> Handler:
        server = _Server(_app(door))
        return lambda method, path, query, headers, body: _guarded(
            server.call, door, method, path, query, headers, body
        )

    return lazy_route(build)


def _guarded(
    call: Handler,
    door: Callable[[], Door],
    method: str,
    path: str,
    query: Query,
    headers: Headers,
    body: bytes,
) -> Answer:
    """The token checks in front of the SDK (see the module docstring)."""
    # deferred: the catalog's join brings SQLAlchemy, which the proxy loads on the first request
    from catalog import join
    from catalog.authority import right_refusal

    refusal = browser_refusal(method, headers, body)
    if refusal is not None:
        return _recorded(door, method, path, query, headers, 403, refusal)
    token = bearer(headers, query)
    try:
        message = json.loads(body) if body else None
    except ValueError:
        return _refused(400, "call", "an MCP request body is one JSON-RPC message")
    if isinstance(message, list):
        return _refused(400, "call", "JSON-RPC batches are not accepted; send one message per request")
    params = message.get("params") if isinstance(message, dict) else None
    is_call = isinstance(message, dict) and message.get("method") == "tools/call"
    tool = params.get("name") if isinstance(params, dict) and is_call else None
    dispatcher = door().dispatcher
    if tool == "call" and isinstance(params, dict):
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and token and not arguments.get("token"):
            params["arguments"] = {**arguments, "token": token}
            body = json.dumps(message).encode()
        return call(method, path, query, headers, body)  # the door refuses and records
    right = "write" if tool in WRITES else None

    def uses(identifier: str) -> int:
        return join.token_uses(dispatcher.ledger.engine, identifier)

    refusal = right_refusal(token, dispatcher.root_key, right, uses)
    if refusal is not None:
        status = 401 if refusal[0] in ("token", "signature") else 403
        return _recorded(door, method, path, query, headers, status, refusal)
    return call(method, path, query, headers, body)


def _recorded(
    door: Callable[[], Door],
    method: str,
    path: str,
    query: Query,
    headers: Headers,
    status: int,
    refusal: tuple[str, str],
) -> Answer:
    """The refusal, filed in the Ledger like the door's own (door `mcp`)."""
    # deferred: the door brings httpx and the catalog, loaded on the first request
    from addons.door.http_face import record_refusal

    record_refusal(door().dispatcher, "mcp", method, path, query, headers, refusal)
    return _refused(status, *refusal)


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
    server = build_server(directory, dispatch=dispatch)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[HOST, f"{HOST}:*"],
        allowed_origins=[f"http://{HOST}", f"https://{HOST}"],
    )
    return server.streamable_http_app(
        streamable_http_path=PATH, json_response=True, stateless_http=True, transport_security=security
    )
