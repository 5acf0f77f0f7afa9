"""`/api/mcp`: the Directory's agent API over MCP streamable HTTP, answered by the proxy itself.

The same `MCPServer` as `flightlog mcp` (catalog.mcp_server, the official SDK), its `call` tool
running rows through the proxy's door (door "mcp"), so the `mcp_http` contract form runs as written.
The SDK's Starlette app is stateless and answers in JSON; it runs on an event loop of its own in a
daemon thread, started on first use (the SDK's import costs ~0.7 s the proxy does not pay at start).
Each request is one ASGI call handed to that loop; its answer is collected whole.

Host and Origin are checked by the SDK: only `flightlog.local` (through the proxy) and no browser
origin other than flightlog.local's, so a page a proxied browser opens cannot drive the Directory.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from addons.door.routes import HOST, Answer, Handler, Headers, Query, lazy_route

PATH = "/api/mcp"
TIMEOUT = 120.0
"""A dispatched call can take a while (an upstream's own timeout is 30 s); past this, 504."""


def _dispatch(call: dict[str, Any], token: str | None) -> tuple[bool, str]:
    """The `call` tool: a canonical call through the proxy's door, recorded like any other."""
    from addons.door.http_face import configured

    result = configured().dispatcher.dispatch(call, door="mcp", token=token)
    return bool(result.reply.get("ok")), json.dumps(result.reply, ensure_ascii=False)


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


def mcp_route(settings: Callable[[], tuple[str, str | None]]) -> Handler:
    """`/api/mcp` over the Directory the proxy serves; `settings()` gives (ledger URL, folder or None)."""
    return lazy_route(lambda: _Server(_app(*settings())).call)


def _app(ledger_url: str, folder: str | None) -> Any:
    from pathlib import Path

    from mcp.server.transport_security import TransportSecuritySettings

    from addons.door.http_face import open_rows
    from catalog.mcp_server import build_server

    directory = open_rows(ledger_url, Path(folder).expanduser() if folder else None)
    server = build_server(directory, dispatch=_dispatch)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[HOST, f"{HOST}:*"],
        allowed_origins=[f"http://{HOST}", f"https://{HOST}"],
    )
    return server.streamable_http_app(
        streamable_http_path=PATH, json_response=True, stateless_http=True, transport_security=security
    )
