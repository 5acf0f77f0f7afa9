"""The proxy's own routes: requests to `flightlog.local` are answered here and never recorded.

A registry maps path prefixes to handlers `handle(method, path, query, headers, body) -> (status,
headers, body)`. Handlers live with the area that owns them and are imported by name when first
used, so a route whose module is not built yet answers 501 instead of breaking the proxy.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from addons.errors import AddonError

if TYPE_CHECKING:
    from mitmproxy import http

HOST = "flightlog.local"

Headers = Mapping[str, str]
Answer = tuple[int, Headers, bytes]
Handler = Callable[[str, str, dict[str, str], Headers, bytes], Answer]

DEFAULT_ROUTES: dict[str, str] = {
    "/api/directory/": "catalog.http_api:handle",
    "/api/ledger/": "addons.ledger_routes:handle",
    "/api/dispatch": "addons.dispatch:handle",
}
"""Prefix → "module:function" of the handler, imported on first use."""


def _json(status: int, payload: object) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode() + b"\n"


@dataclass
class Routes:
    """Path prefixes and their handlers; the longest matching prefix wins."""

    specs: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ROUTES))
    handlers: dict[str, Handler] = field(default_factory=dict)

    def add(self, prefix: str, handler: Handler) -> None:
        """Register a handler function directly (tests, embedders)."""
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

    def answer(self, method: str, path: str, query: dict[str, str], headers: Headers, body: bytes) -> Answer:
        """The answer of the route matching `path`: 404 for none, 501 for one not built yet."""
        prefixes = sorted({*self.specs, *self.handlers}, key=len, reverse=True)
        for prefix in prefixes:
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                handler = self._resolve(prefix)
                if handler is None:
                    return _json(501, {"error": f"{prefix} is not built in this flightlog"})
                return handler(method, path, query, headers, body)
        return _json(404, {"error": f"no flightlog route for {path}", "routes": prefixes})


class LocalRoutes:
    """Answers `flightlog.local` itself; the capture addon sees the skip mark and records nothing."""

    def __init__(self, routes: Routes | None = None) -> None:
        self.routes = routes or Routes()

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.pretty_host == HOST or flow.request.data.host == HOST:
            flow.metadata["flightlog.skip"] = True
            flow.metadata["flightlog.local"] = True

    async def request(self, flow: http.HTTPFlow) -> None:
        if not flow.metadata.get("flightlog.local"):
            return
        from mitmproxy import http

        req = flow.request
        path, _, query_string = req.path.partition("?")
        query = dict(parse_qsl(query_string))
        headers = {k: v for k, v in req.headers.items()}
        try:
            status, out_headers, body = await asyncio.to_thread(
                self.routes.answer, req.method, path, query, headers, req.raw_content or b""
            )
        except Exception as e:  # a failing handler answers 500; the proxy keeps running
            status, out_headers, body = _json(500, {"error": f"{type(e).__name__}: {e}"})
        flow.response = http.Response.make(status, body, dict(out_headers))
