"""flightlog.local without the network: an httpx transport that answers from the route registry.

The starter Directory's rows describe flightlog's own routes (`http://flightlog.local/api/...`).
When the door calls one of them, there is no proxy in between to answer that host (the door calls
upstreams directly), so this transport hands the request to the same `Routes` the proxy uses.
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import parse_qs

import httpx

from addons.door.routes import HOST, Handler, Routes, directory_handler
from addons.readback import ledger_routes
from storage.ledger import Ledger


class LocalTransport(httpx.BaseTransport):
    """Answers every request it is given from `routes`, in-process."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.url.query.decode("ascii", "replace"), keep_blank_values=True)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers.raw}
        status, out, body = self.routes.answer(
            request.method, request.url.path, query, headers, request.read()
        )
        return httpx.Response(status, headers=dict(out), stream=httpx.ByteStream(body), request=request)


def local_mounts(
    ledger: Ledger, ledger_token: str, directory: Any = None, dispatch: Handler | None = None
) -> dict[str, httpx.BaseTransport]:
    """httpx `mounts` that send flightlog.local to the registry: the Ledger routes read `ledger` and
    accept `ledger_token`; the Directory's routes serve `directory` (the door's own, when given).
    The door has checked the caller's rights before it calls here (`addons.door.checks`)."""
    routes = Routes()
    if directory is not None:
        routes.add("/api/directory/", directory_handler(directory))
    routes.add("/api/ledger/", functools.partial(ledger_routes.handle, ledger=ledger, token=ledger_token))
    if dispatch is not None:  # the door reached through flightlog.local (the DISPATCH row): it asks
        routes.add("/api/dispatch", dispatch)  # for a token of its own, like any network call
    return {f"all://{HOST}": LocalTransport(routes)}
