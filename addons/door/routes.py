"""The route table of `flightlog.local`: path prefixes and the plain handlers that answer them.

A handler is `handle(method, path, query, headers, body) -> (status, headers, body)` (`query` maps
each name to its values); it blocks, so the proxy runs it off the event loop. Handlers that open a
database or load an SDK are built on their first request (`lazy_route`), never at start-up. The
mitmproxy addon that answers these routes is `addons.local_routes`; `local_transport` answers them
without a network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

HOST = "flightlog.local"

Headers = Mapping[str, str]
Query = Mapping[str, list[str]]
Answer = tuple[int, Mapping[str, str], bytes]
Handler = Callable[[str, str, Query, Headers, bytes], Answer]


def json_answer(status: int, payload: object) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode() + b"\n"


@dataclass
class Routes:
    """Path prefixes and their handlers; the longest matching prefix wins."""

    handlers: dict[str, Handler] = field(default_factory=dict)

    def add(self, prefix: str, handler: Handler) -> None:
        """Register a handler function directly."""
        self.handlers[prefix] = handler

    def answer(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        """The answer of the route matching `path`, or 404 naming the routes there are."""
        prefixes = sorted(self.handlers, key=len, reverse=True)
        for prefix in prefixes:
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                return self.handlers[prefix](method, path, query, headers, body)
        return json_answer(404, {"error": f"no flightlog route for {path}", "routes": prefixes})


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


def directory_handler(directory: Any) -> Handler:
    """`/api/directory/`: the catalog's handler over one open Directory."""
    # deferred: the catalog loads on the first request, not at the proxy's start
    from catalog.http_api import handle as directory_handle

    return lambda method, path, query, headers, body: directory_handle(
        method, path, query, headers, body, directory
    )
