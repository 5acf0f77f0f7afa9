"""The proxy's own routes: requests to `flightlog.local` are answered here and never recorded.

The table is `addons.door.routes.Routes`, filled here directly: the Directory (`catalog.http_api`),
the Ledger's read routes, the dispatch door and the MCP route, each built on its first request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from addons.door.mcp_route import mcp_route
from addons.door.routes import HOST, Routes, directory_route, dispatch_route, json_answer, ledger_route

if TYPE_CHECKING:
    from mitmproxy import http
    from mitmproxy.addonmanager import Loader


class LocalRoutes:
    """Answers `flightlog.local` itself; the capture addon sees the skip mark and records nothing."""

    def __init__(self, routes: Routes | None = None) -> None:
        self.routes = routes or Routes()
        if "/api/directory/" not in self.routes.handlers:
            self.routes.add("/api/directory/", directory_route(directory_settings))
        if "/api/ledger/" not in self.routes.handlers:
            self.routes.add("/api/ledger/", ledger_route(_ledger_settings))
        self.routes.handlers.setdefault("/api/dispatch", dispatch_route())
        self.routes.handlers.setdefault("/api/mcp", mcp_route(directory_settings))

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "flightlog_directory",
            str,
            "",
            "The Directory folder served at /api/directory/ (FLIGHTLOG_DIRECTORY).",
        )

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.pretty_host == HOST or flow.request.data.host == HOST:
            flow.metadata["flightlog.skip"] = True
            flow.metadata["flightlog.local"] = True

    def request(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        """Plain for every other flow; a coroutine (awaited by mitmproxy) only for our own routes."""
        if not flow.metadata.get("flightlog.local"):
            return None
        return self._answer(flow)

    async def _answer(self, flow: http.HTTPFlow) -> None:
        from mitmproxy import http

        req = flow.request
        path, _, query_string = req.path.partition("?")
        query = parse_qs(query_string, keep_blank_values=True)
        headers = dict(req.headers.items())
        try:
            status, out_headers, body = await asyncio.to_thread(
                self.routes.answer, req.method, path, query, headers, req.raw_content or b""
            )
        except Exception as e:  # a failing handler answers 500; the proxy keeps running
            status, out_headers, body = json_answer(500, {"error": f"{type(e).__name__}: {e}"})
        flow.response = http.Response.make(status, body, dict(out_headers))


def _ledger_settings() -> tuple[str, str]:
    """The Ledger and blob URLs the proxy records to: its options, else the environment's defaults."""
    from mitmproxy import ctx

    from addons.recording.capture_setup import default_urls

    ledger, blobs = default_urls()
    return (
        getattr(ctx.options, "flightlog_ledger", "") or ledger,
        getattr(ctx.options, "flightlog_blobs", "") or blobs,
    )


def directory_settings() -> tuple[str, str | None]:
    """The Ledger URL and the Directory folder (None: the native Directory) the proxy serves."""
    import os

    from mitmproxy import ctx

    folder = ctx.options.flightlog_directory or os.environ.get("FLIGHTLOG_DIRECTORY") or None
    return _ledger_settings()[0], folder
