"""The proxy's own routes: requests to `flightlog.local` are answered here and never recorded.

A registry maps path prefixes to handlers `handle(method, path, query, headers, body) -> (status,
headers, body)` (`query` maps each name to its values). Handlers live with the area that owns them:
`/api/directory/` is `catalog.http_api.handle` over the Directory named by the options; the others
are imported by name when first used, so a route whose module is not built yet answers 501
instead of breaking the proxy.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from addons.errors import AddonError

if TYPE_CHECKING:
    from mitmproxy import http
    from mitmproxy.addonmanager import Loader

HOST = "flightlog.local"

Headers = Mapping[str, str]
Query = Mapping[str, list[str]]
Answer = tuple[int, Mapping[str, str], bytes]
Handler = Callable[[str, str, Query, Headers, bytes], Answer]

DEFAULT_ROUTES: dict[str, str] = {
    "/api/dispatch": "addons.door.dispatch:handle",
    "/api/mcp": "addons.door.mcp_route:handle",
}
"""Prefix → "module:function" of handlers imported on first use (the Directory's and the Ledger's,
which read the database the proxy records to, are wired below)."""


def _json(status: int, payload: object) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode() + b"\n"


@dataclass
class Routes:
    """Path prefixes and their handlers; the longest matching prefix wins."""

    specs: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ROUTES))
    handlers: dict[str, Handler] = field(default_factory=dict)

    def add(self, prefix: str, handler: Handler) -> None:
        """Register a handler function directly."""
        self.handlers[prefix] = handler

    def _resolve(self, prefix: str) -> Handler | None:
        if prefix in self.handlers:
            return self.handlers[prefix]
        module_name, _, function = self.specs[prefix].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name and module_name.startswith(e.name):
                return None
            raise AddonError(f"route {prefix}: cannot import {module_name}: {e}") from e
        handler: Handler = getattr(module, function)
        self.handlers[prefix] = handler
        return handler

    def answer(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        """The answer of the route matching `path`: 404 for none, 501 for one not built yet."""
        prefixes = sorted({*self.specs, *self.handlers}, key=len, reverse=True)
        for prefix in prefixes:
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                handler = self._resolve(prefix)
                if handler is None:
                    return _json(501, {"error": f"{prefix} is not built in this flightlog"})
                return handler(method, path, query, headers, body)
        return _json(404, {"error": f"no flightlog route for {path}", "routes": prefixes})


def lazy_route(build: Callable[[], Handler]) -> Handler:
    """A handler built by `build()` when the first request arrives (opening a database or loading an
    SDK is not start-up work), once, however many requests arrive at the same time."""
    lock = threading.Lock()
    built: list[Handler] = []

    def handle(method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        with lock:
            if not built:
                built.append(build())
        return built[0](method, path, query, headers, body)

    return handle


def directory_route(settings: Callable[[], tuple[str, str | None]]) -> Handler:
    """`/api/directory/`: the catalog's handler over the Directory, opened on first use.

    `settings()` gives (ledger URL, Directory folder or None) when the first request arrives.
    """

    def build() -> Handler:
        from catalog.directory import open_directory
        from catalog.http_api import handle as directory_handle

        directory = open_directory(*settings())
        return lambda method, path, query, headers, body: directory_handle(
            method, path, query, headers, body, directory
        )

    return lazy_route(build)


def ledger_route(settings: Callable[[], tuple[str, str]]) -> Handler:
    """`/api/ledger/`: the Ledger's read routes over the Ledger the proxy records to, opened on first
    use; the bearer token is the one kept in FLIGHTLOG_HOME. `settings()` gives (ledger URL, blobs URL)."""

    def build() -> Handler:
        from addons.readback.ledger_routes import ledger_handler
        from storage.ledger import open_ledger
        from storage.locations import flightlog_home

        return ledger_handler(open_ledger(*settings()), flightlog_home())

    return lazy_route(build)


class LocalRoutes:
    """Answers `flightlog.local` itself; the capture addon sees the skip mark and records nothing."""

    def __init__(self, routes: Routes | None = None) -> None:
        self.routes = routes or Routes()
        if "/api/directory/" not in self.routes.handlers:
            self.routes.add("/api/directory/", directory_route(directory_settings))
        if "/api/ledger/" not in self.routes.handlers:
            self.routes.add("/api/ledger/", ledger_route(_ledger_settings))

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
            status, out_headers, body = _json(500, {"error": f"{type(e).__name__}: {e}"})
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
