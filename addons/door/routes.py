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


def dispatch_route() -> Handler:
    """`/api/dispatch`: the door, imported on the first dispatch. It brings SQLAlchemy and the catalog,
    which the proxy process does not carry until a call needs them, and the door itself reaches
    flightlog.local through this table (`local_transport`), so it cannot be imported here."""

    def build() -> Handler:
        from addons.door.dispatch import handle

        return handle

    return lazy_route(build)
