"""flightlog.local without the network: an httpx transport that answers from the declared routes.

The starter Directory's rows describe flightlog's own routes (`http://flightlog.local/api/...`).
When the door calls one of them, there is no proxy in between to answer that host (the door calls
upstreams directly), so this transport hands the request to the same declared routes the proxy
serves (`door.declarations`), through the same gate (`door.gatekeeper`), judged with
the caller's own token and identity (`Lent`) and spending no second use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx

from door.declarations import directory_route, dispatch_route, graphql_route, ledger_route
from door.gatekeeper import Gatekeeper, Lent
from door.routes import HOST, Handler, Routes, directory_handler
from readback import ledger_routes
from storage.ledger import Ledger


class LocalTransport(httpx.BaseTransport):
    """Answers every request it is given from `routes`, in-process, for the caller `lent()` gives."""

    def __init__(self, routes: Routes, gate: Gatekeeper, lent: Callable[[], Lent]) -> None:
        self.routes = routes
        self.gate = gate
        self.lent = lent

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.url.query.decode("ascii", "replace"), keep_blank_values=True)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers.raw}
        status, out, body = self.gate.answer(
            self.routes, request.method, request.url.path, query, headers, request.read(), self.lent()
        )
        return httpx.Response(status, headers=dict(out), stream=httpx.ByteStream(body), request=request)


def local_routes(
    ledger: Ledger, ledger_token: str, directory: Any = None, dispatch: Handler | None = None
) -> Routes:
    """The routes the door reaches in-process: the Ledger's (accepting `ledger_token`, the rows'
    credential), the Directory's over `directory` (the door's own), the door itself."""
    routes = Routes()
    if directory is not None:
        routes.add(directory_route(directory_handler(directory), lambda: directory))
    routes.add(ledger_route(functools.partial(ledger_routes.handle, ledger=ledger, token=ledger_token)))
    if dispatch is not None:  # the door reached through flightlog.local (the DISPATCH row): it asks
        routes.add(dispatch_route(dispatch))  # for a token of its own, like any network call
        routes.add(ledger_route(dispatch, "/api/join/"))
        routes.add(graphql_route(dispatch))
    return routes


def local_mounts(
    routes: Routes, gate: Gatekeeper, lent: Callable[[], Lent]
) -> dict[str, httpx.BaseTransport]:
    """httpx `mounts` that send flightlog.local to `routes`, through `gate`."""
    return {f"all://{HOST}": LocalTransport(routes, gate, lent)}
