"""The route table of `flightlog.local`: each route, what it asks of the gate, and its handler.

A handler is `handle(method, path, query, headers, body) -> (status, headers, body)` (`query` maps
each name to its values); it blocks, so the proxy runs it off the event loop. Handlers that open a
database or load an SDK are built on their first request (`lazy_route`), never at start-up. The
mitmproxy addon that answers these routes is `addons.local_routes`; `local_transport` answers them
without a network; both go through `door.gatekeeper`.

A `Route` cannot be made without saying what its requests ask (deny by default): the door it is
reached through, the gate's verbs it may ask (`authority.gate.VERBS`, checked when the route is
made) and `declare`, which reads one request into a `Declared` verb and the rows it acts on. A
declaration naming a verb the route did not list is refused at request time (`RouteError`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from door.errors import RouteError

if TYPE_CHECKING:
    from authority.gate import Row

HOST = "flightlog.local"

Headers = Mapping[str, str]
Query = Mapping[str, list[str]]
Answer = tuple[int, Mapping[str, str], bytes]
Handler = Callable[[str, str, Query, Headers, bytes], Answer]


@dataclass(frozen=True, slots=True)
class Declared:
    """What one request asks the gate: a verb and the rows it acts on. `handler_judges`: the handler
    asks the gate itself (the dispatch door, which files every call and refusal as an action)."""

    verb: str
    rows: tuple[Row, ...] = ()
    handler_judges: bool = False


Declare = Callable[[str, str, Query, Headers, bytes], Declared]


@dataclass(frozen=True, slots=True)
class Route:
    """A path prefix, the door it is, the verbs its requests may ask, how one declares, its handler."""

    prefix: str
    door: str
    verbs: frozenset[str]
    declare: Declare
    handler: Handler

    def __post_init__(self) -> None:
        from authority.caveats import DOORS  # deferred: the catalog loads on the first request
        from authority.gate import VERBS

        if not self.verbs or not self.verbs <= set(VERBS):
            raise RouteError(f"route {self.prefix}: declare its verbs among {', '.join(VERBS)}")
        if self.door not in DOORS or not callable(self.declare) or not callable(self.handler):
            raise RouteError(f"route {self.prefix}: a door of {', '.join(DOORS)}, a declare and a handler")

    def declared(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Declared:
        """The request's declaration, checked against the verbs the route listed."""
        found = self.declare(method, path, query, headers, body)
        if found.verb not in self.verbs:
            raise RouteError(f"route {self.prefix} declared {found.verb!r}, not one of its verbs")
        return found


def json_answer(status: int, payload: object) -> Answer:
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode() + b"\n"


@dataclass
class Routes:
    """Routes by path prefix; the longest matching prefix wins."""

    routes: dict[str, Route] = field(default_factory=dict)

    def add(self, route: Route) -> None:
        """Register a route (only a `Route`: its verbs and declaration come with it)."""
        if not isinstance(route, Route):
            raise RouteError(f"not a Route: {route!r} (a route declares its door, verbs and target)")
        self.routes[route.prefix] = route

    def match(self, path: str) -> Route | None:
        """The route for `path`, or None."""
        for prefix in sorted(self.routes, key=len, reverse=True):
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                return self.routes[prefix]
        return None

    def missing(self, path: str) -> Answer:
        """404 naming the routes there are."""
        return json_answer(404, {"error": f"no flightlog route for {path}", "routes": sorted(self.routes)})


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
