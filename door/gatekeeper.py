"""The gate's shell for flightlog.local's routes: every request a route declares is judged once.

`Gatekeeper.answer(routes, method, path, query, headers, body)` is what the proxy's local routes and
the door's in-process transport run for every request:

1. a browser-shaped request from elsewhere is refused, on every path (`door.callers`);
2. the route for the path (an unknown one: 404 naming the routes there are);
3. the route declares the request's verb and rows (`door.routes.Route.declared`);
4. unless its handler judges it itself (the dispatch door), the gate (`authority.gate.admit`) judges
   the bearer token for that verb, rows and door, with the identity the request claims (proxy
   credentials and `X-Flightlog-*` headers), spending a use;
5. every refusal is filed in the Ledger as the door's own refusals are, and answered 401 or 403.

The Ledger's own bearer token (FLIGHTLOG_HOME/api-token) is the operator's: it passes the gate for
reading the Ledger, and for nothing else. The door's calls to its own routes (`Lent`) are judged
with the caller's token and identity, not the credential the row carries, and spend no second use.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from door.callers import bearer, browser_refusal
from door.errors import RouteError
from door.routes import Answer, Headers, Query, Route, Routes, json_answer
from recording.identity import Identity, from_headers, from_proxy_authorization

if TYPE_CHECKING:
    from authority.gate import UseBook

Record = Callable[[str, str, str, Query, Headers, tuple[str, str]], None]
"""Files a refusal: (door, method, path, query, headers, (limit, message))."""
UNAUTHENTICATED = frozenset({"token", "signature", "caveat"})


def call_head(method: str, path: str, query: Query, headers: Headers) -> bytes:
    """The call as it came in, for the Ledger: start line and header fields (the token hidden)."""
    pairs = [f"{k}={v}" for k, values in query.items() for v in values if k != "token"]
    target = path + ("?" + "&".join(pairs) if pairs else "")
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    return "\r\n".join(lines).encode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Lent:
    """The caller a door's own call to flightlog.local is made for: its token, identity and door."""

    token: str | None
    identity: Identity
    door: str
    trusted: bool = False


def identity_of(headers: Headers) -> Identity:
    """Who a request says it is: `X-Flightlog-*` headers over the proxy URL's credentials."""
    proxy_auth = next((v for k, v in headers.items() if k.lower() == "proxy-authorization"), None)
    return from_headers(headers.items()).over(from_proxy_authorization(proxy_auth))


@dataclass
class Gatekeeper:
    """The gate with what it needs: the root key, the Ledger's use book, the operator's Ledger token
    and where refusals are filed."""

    root_key: bytes
    book: UseBook
    api_token: str
    record: Record

    def judge(
        self,
        route: Route,
        method: str,
        path: str,
        query: Query,
        headers: Headers,
        body: bytes,
        lent: Lent | None = None,
    ) -> tuple[str, str] | None:
        """Why the request may not go on (limit, message), or None (a use spent when it spends)."""
        from authority.gate import Ask, GateRefused, admit  # deferred: the catalog, first request

        try:
            declared = route.declared(method, path, query, headers, body)
        except RouteError as e:
            return "verb", str(e)
        if declared.handler_judges:
            return None
        given = bearer(headers, query) if lent is None else lent.token
        if (
            lent is None
            and declared.verb == "ledger"
            and given
            and hmac.compare_digest(given, self.api_token)
        ):
            return None  # the operator's own Ledger token
        who = identity_of(headers) if lent is None else lent.identity
        ask = Ask(
            declared.verb,
            route.door if lent is None else lent.door,
            datetime.now(UTC),
            declared.rows,
            who.agent,
            who.task,
            trusted=lent is not None and lent.trusted,
            inner=lent is not None,
        )
        try:
            admit(given, ask, self.root_key, self.book, spend=lent is None)
        except GateRefused as e:
            return e.limit, str(e)
        return None

    def answer(
        self,
        routes: Routes,
        method: str,
        path: str,
        query: Query,
        headers: Headers,
        body: bytes,
        lent: Lent | None = None,
    ) -> Answer:
        """One request to a route, judged first (see the module docstring); blocking."""
        route = routes.match(path)
        door = lent.door if lent is not None else route.door if route is not None else "http"
        refusal = browser_refusal(method, headers, body)
        if refusal is None:
            if route is None:
                return routes.missing(path)
            refusal = self.judge(route, method, path, query, headers, body, lent)
        if refusal is None:
            assert route is not None
            return route.handler(method, path, query, headers, body)
        self.record(door, method, path, query, headers, refusal)
        return refused(401 if refusal[0] in UNAUTHENTICATED else 403, *refusal)


def refused(status: int, limit: str, message: str) -> Answer:
    """A refusal as flightlog's routes answer it (the door's shape: `refused: {limit, message}`)."""
    code, headers, body = json_answer(status, {"ok": False, "refused": {"limit": limit, "message": message}})
    return code, {**headers, "www-authenticate": 'Bearer realm="flightlog"'}, body
