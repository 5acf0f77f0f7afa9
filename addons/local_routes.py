"""The proxy's own routes: requests to `flightlog.local` are answered here and never recorded.

`configure()` resolves the proxy's settings once (`door.proxy_settings.resolve`: options,
then the environment, then FLIGHTLOG_HOME's defaults) and fills the route table
(`door.routes.Routes`) with parts built from that one value: the Directory
(`catalog.http_api`), the Ledger's read routes, the dispatch door and the MCP route, each opened on
its first request. Every request first passes the gate (`door.gatekeeper`): a browser-shaped
request from another origin, another Host or with a non-JSON body is refused on every route, and
each route's declared verb and rows (`door.declarations`) are judged against every caveat
of the request's token (`authority.gate`), each refusal filed in the Ledger.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from addons.flow_notes import LOCAL, SKIP
from door.callers import bearer, browser_refusal
from door.declarations import directory_route, dispatch_route, graphql_route, ledger_route
from door.gatekeeper import refused
from door.mcp_route import mcp_route
from door.proxy_settings import ProxySettings, resolve
from door.routes import (
    HOST,
    Answer,
    Handler,
    Headers,
    Query,
    Routes,
    directory_handler,
    json_answer,
    lazy_route,
)
from storage.configuration import setting

if TYPE_CHECKING:
    from mitmproxy import http, tls
    from mitmproxy.addonmanager import Loader

    from catalog.directory import Directory
    from door.gatekeeper import Gatekeeper
    from door.http_face import Door
    from door.upstream_judge import Judge

log = logging.getLogger("flightlog.routes")

OPTIONS = frozenset(
    {
        "flightlog_directory",
        "flightlog_open",
        "flightlog_local_commands",
        "flightlog_ledger",
        "flightlog_blobs",
        "flightlog_secrets",
        "flightlog_secret_env",
    }
)
"""The options the routes are built from; changing one rebuilds them."""
OPEN_MODE_WARNING = (
    "flightlog: OPEN MODE: calls through flightlog.local/api/dispatch need no token; "
    "anyone who reaches this proxy can run Directory rows (local development only)"
)


class _Parts:
    """The parts built from one settings value, each opened on first use and shared (the door and
    the MCP route run over the same Directory and Ledger; the gate over the door's root key and Ledger)."""

    def __init__(self, settings: ProxySettings, judge: Judge | None = None) -> None:
        self.settings = settings
        self.judge = judge
        self._lock = threading.Lock()
        self._door: Door | None = None
        self._gatekeeper: Gatekeeper | None = None

    def door(self) -> Door:
        from door.assembly import proxy_door  # deferred: the door loads on the first request

        with self._lock:
            if self._door is None:
                self._door = proxy_door(self.settings)
                self._door.dispatcher.egress = self.judge  # its upstreams before the proxy's judge
            return self._door

    def gatekeeper(self) -> Gatekeeper:
        """The gate's shell over the door's root key and Ledger (built with the door)."""
        from door.assembly import gatekeeper  # deferred: the door loads on the first request

        door = self.door()
        with self._lock:
            if self._gatekeeper is None:
                self._gatekeeper = gatekeeper(door.dispatcher)
            return self._gatekeeper

    def close(self) -> None:
        """Close what the door opened (its HTTP client, Ledger and Directory), if it was built."""
        with self._lock:
            door, self._door = self._door, None
        if door is not None:
            door.dispatcher.close()
            door.dispatcher.ledger.close()
            if door.directory is not None:
                door.directory.close()

    def directory(self) -> Directory:
        directory = self.door().directory
        assert directory is not None, "the proxy's door always carries its Directory"
        return directory

    def directory_handler(self) -> Handler:
        return directory_handler(self.directory())

    def ledger_handler(self) -> Handler:
        from readback.ledger_routes import judged_handler  # deferred: SQLAlchemy, first use

        return judged_handler(self.door().dispatcher.ledger)

    def dispatch_handler(self) -> Handler:
        return self.door().handle

    def record(
        self, method: str, path: str, query: Query, headers: Headers, refusal: tuple[str, str]
    ) -> None:
        """File a refusal made outside the route table (a WebSocket's upgrade), as the gate files its own."""
        try:
            keeper = self.gatekeeper()
        except Exception:  # a Ledger that cannot be opened cannot record; the refusal stands
            return
        keeper.record("http", method, path, query, headers, refusal)


def build_routes(settings: ProxySettings, judge: Judge | None = None) -> tuple[Routes, _Parts]:
    """The route table over one settings value (each route declared: `door.declarations`)."""
    parts = _Parts(settings, judge)
    routes = Routes()
    routes.add(directory_route(lazy_route(parts.directory_handler), parts.directory))
    routes.add(ledger_route(lazy_route(parts.ledger_handler)))
    routes.add(dispatch_route(lazy_route(parts.dispatch_handler)))
    routes.add(ledger_route(lazy_route(parts.dispatch_handler), "/api/join/"))
    routes.add(mcp_route(parts.door))
    routes.add(graphql_route(lazy_route(parts.dispatch_handler)))
    return routes, parts


HOST_BYTES = HOST.encode()
DOOR_PATH = "/api/dispatch"


def _json_parts(status: int, payload: object) -> tuple[int, bytes, dict[str, str]]:
    code, headers, body = json_answer(status, payload)
    return code, body, dict(headers)


def for_us(request: http.Request) -> bool:
    """`request.pretty_host == HOST or request.host == HOST`, asking `pretty_host` (a Host lookup, a
    regex and a host check: a fifth of the hooks' cost, measured) only when `flightlog.local` is in
    the authority or a header value, as it must be, unchanged, for `pretty_host` to be it."""
    data = request.data
    if data.host == HOST:
        return True
    if HOST_BYTES in data.authority:
        return request.pretty_host == HOST
    for _, value in data.headers.fields:
        if HOST_BYTES in value:
            return request.pretty_host == HOST
    return False


class LocalRoutes:
    """Answers `flightlog.local` itself; the capture addon sees the skip mark and records nothing."""

    def __init__(self, settings: ProxySettings | None = None, judge: Judge | None = None) -> None:
        from door.websocket_face import WebSocketDoor

        self.judge = judge
        """The egress judge the door's upstream calls are put to (the proxy's: `Egress.judge_upstream`)."""
        self.settings: ProxySettings | None = None
        self.routes = Routes()
        self._parts: _Parts | None = None
        self._websockets = WebSocketDoor()
        if settings is not None:
            self.use(settings)

    def use(self, settings: ProxySettings) -> None:
        """Build the routes over `settings` (what `configure()` does with the resolved options)."""
        if self._parts is not None:
            self._parts.close()
        self.settings = settings
        self.routes, self._parts = build_routes(settings, self.judge)

    def load(self, loader: Loader) -> None:
        directory = setting("directory")
        loader.add_option(directory.option_name, directory.type, directory.default, directory.help)
        loader.add_option(
            "flightlog_open",
            bool,
            False,
            "Open mode for local development: calls through /api/dispatch need no token (said at start).",
        )
        loader.add_option(
            "flightlog_local_commands",
            bool,
            False,
            "Let the door run rows whose contract runs a command here, only with a token naming the tool.",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        if self.settings is not None and not (updated & OPTIONS):
            return
        self.use(resolve(ctx.options, os.environ))
        if self.settings is not None and self.settings.open_mode and "flightlog_open" in updated:
            log.warning(OPEN_MODE_WARNING)

    def done(self) -> None:
        self._websockets.close()
        if self._parts is not None:
            self._parts.close()

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """A tunnel to `flightlog.local` is answered here, so mitmproxy's eager connection strategy
        (what plain mitmdump does, kept for transparency) never tries to reach a host that does not exist."""
        from mitmproxy import http

        if flow.request.host == HOST:
            flow.response = http.Response.make(200)
            flow.response.reason = "Connection established"

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        """TLS to `flightlog.local` is ours: no upstream handshake first (there is no upstream)."""
        if data.context.server.address is not None and data.context.server.address[0] == HOST:
            data.establish_server_tls_first = False

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """Only the forward listener answers `flightlog.local`: a reverse listener (the model APIs'
        ones included) forwards every request to its target, even one whose Host header says
        flightlog.local (`--set keep_host_header=true`), so opening one opens no door."""
        from mitmproxy.proxy.mode_specs import RegularMode

        if not isinstance(flow.client_conn.proxy_mode, RegularMode):
            return
        if for_us(flow.request):
            SKIP.put(flow, True)
            LOCAL.put(flow, True)

    def request(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        """Plain for every other flow; a coroutine (awaited by mitmproxy) only for our own routes."""
        if not LOCAL.get(flow):
            return None
        from door.websocket_face import is_upgrade

        if is_upgrade(flow.request.headers) and flow.request.path.partition("?")[0].rstrip("/") == DOOR_PATH:
            return self._upgrade(flow)
        return self._answer(flow)

    def answer(self, method: str, path: str, query: Query, headers: Headers, body: bytes) -> Answer:
        """One request to a local route, judged by the gate first (blocking: run off the loop)."""
        if self._parts is None:  # not configured yet: closed, never open
            return refused(503, "settings", "flightlog's routes are not configured yet")
        return self._parts.gatekeeper().answer(self.routes, method, path, query, headers, body)

    async def _upgrade(self, flow: http.HTTPFlow) -> None:
        """A WebSocket to the door (`door.websocket_face`): checked like any door request,
        then handed to the door's WebSocket end with a one-time ticket for what the upgrade carried."""
        from mitmproxy import http

        from door.gatekeeper import call_head
        from door.websocket_face import TICKET_HEADER

        req = flow.request
        path, _, query_string = req.path.partition("?")
        query = parse_qs(query_string, keep_blank_values=True)
        headers = dict(req.headers.items())
        refusal = browser_refusal(req.method, headers, b"")
        parts = self._parts
        if refusal is not None or parts is None:
            refusal = refusal or ("settings", "flightlog's routes are not configured yet")
            if parts is not None:
                await asyncio.to_thread(parts.record, req.method, path, query, headers, refusal)
            status, out_headers, body = refused(403 if parts is not None else 503, *refusal)
            flow.response = http.Response.make(status, body, dict(out_headers))
            return
        try:
            door = await asyncio.to_thread(parts.door)
        except Exception as e:  # the door cannot open (its Ledger, its Directory): one clear answer
            flow.response = http.Response.make(*_json_parts(503, {"error": f"{type(e).__name__}: {e}"}))
            return
        token, head = bearer(headers, query), call_head(req.method, path, query, headers)
        ticket = self._websockets.admit(lambda message: door.websocket_call(message, token, headers, head))
        host, port = await self._websockets.address()
        req.scheme, req.host, req.port = "http", host, port
        req.headers[TICKET_HEADER] = ticket

    async def _answer(self, flow: http.HTTPFlow) -> None:
        from mitmproxy import http

        req = flow.request
        path, _, query_string = req.path.partition("?")
        query = parse_qs(query_string, keep_blank_values=True)
        headers = dict(req.headers.items())
        try:
            status, out_headers, body = await asyncio.to_thread(
                self.answer, req.method, path, query, headers, req.raw_content or b""
            )
        except Exception as e:  # a failing handler answers 500; the proxy keeps running
            status, out_headers, body = json_answer(500, {"error": f"{type(e).__name__}: {e}"})
        flow.response = http.Response.make(status, body, dict(out_headers))
