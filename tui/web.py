"""`flightlog browse --web`: the browser served as a web page (textual-serve), for this machine's pages only.

textual-serve runs the browser once per websocket, in a child process whose screen it streams to the
page. Whoever drives that websocket reads the Ledger (and can replay and export from it), and any page
the user's own web browser renders can try: a cross-site page opens `ws://127.0.0.1:PORT/ws` (a
websocket is not held by the same-origin rule), and a DNS-rebinding page reaches the port under a name
of its own; and loopback is shared by every user of the machine. So the server listens on loopback
unless asked otherwise, answers only requests that name it in their `Host` and carry the key it
printed (in the URL, then a cookie), and starts the browser only for a websocket whose `Origin` is
one of its own pages.
The page is served without its web fonts (textual-serve's page fetches them from Google): nothing
outside this machine learns that the Ledger is being read.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import secrets
import shutil
import socket
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import textual_serve.server
from aiohttp import web
from aiohttp.typedefs import Middleware
from textual_serve.server import Server

from tui.errors import TuiError

DEFAULT_LISTEN: Final = "127.0.0.1:8765"
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
WEBSOCKET_PATH: Final = "/ws"
STATIC_PREFIX: Final = "/static/"
KEY_PARAM: Final = "flightlog-key"
FONTS: Final = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>")
log = logging.getLogger("flightlog.web")


@dataclass(frozen=True, slots=True)
class Listen:
    """Where the page is served: a host (a name or an address) and a port."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def netloc(self) -> str:
        """The host and port as a URL names them (an IPv6 address in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def public_netloc(self) -> str:
        """The host and port a page is opened at: this machine's name for an address meaning any
        (`0.0.0.0`, `::`), whose page would otherwise point its websocket at an address no browser
        can reach."""
        if self.host in ("0.0.0.0", "::"):
            return f"{socket.gethostname()}:{self.port}"
        return self.netloc


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (`localhost` or a loopback address)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_listen(text: str, *, open_to_network: bool = False) -> Listen:
    """`HOST:PORT` (`[::1]:PORT` for IPv6, or only `PORT` on 127.0.0.1); an address other machines
    can reach is refused unless `open_to_network` (the page shows the Ledger to whoever opens it)."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text.strip()
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise TuiError(f"--listen takes HOST:PORT with a port from 1 to 65535, not {text!r}")
    listen = Listen(host, int(port_text))
    if not listen.loopback and not open_to_network:
        raise TuiError(
            f"--listen {text}: {host} is reachable from other machines, and the page shows the Ledger to "
            "whoever opens it; listen on 127.0.0.1 (or add --open-to-network if that is what you want)"
        )
    return listen


def allowed_hosts(listen: Listen) -> frozenset[str] | None:
    """The `Host` values a request may carry: this server's names with its port (None: any, for a server
    opened to the network, whose names this process cannot know)."""
    if not listen.loopback:
        return None
    return frozenset({listen.netloc.lower(), *(f"{name}:{listen.port}" for name in LOOPBACK_NAMES)})


def refusal(listen: Listen, host: str | None, origin: str | None, path: str) -> str | None:
    """Why a request must not be answered, or None when it may.

    The `Host` must name this server (a DNS-rebinding page sends its own name); a request a page sent
    (it carries the page's `Origin`: a cross-site POST or websocket) must come from a page of this
    server, and the websocket that starts the browser must say so (every web browser sends an
    `Origin` with one). A server opened to the network takes any `Host`, and an `Origin` that is
    the page the request was sent to (same origin).
    """
    hosts = allowed_hosts(listen)
    named = (host or "").strip().lower()
    if not named:
        return "no Host header"
    if hosts is not None and named not in hosts:
        return f"Host {named!r} is not this server ({listen.netloc})"
    if not origin:
        if path == WEBSOCKET_PATH:
            return "a websocket without an Origin (only this server's own page may open one)"
        return None
    parts = urlsplit(origin.strip().lower())
    page = parts.netloc
    if parts.scheme not in ("http", "https") or (page not in hosts if hosts is not None else page != named):
        return f"a request from the page {origin!r}, which is not one of this server's"
    return None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def key_refusal(path: str, presented: str | None, key: str) -> str | None:
    """Why a request without this server's key must not be answered (None: it may be).

    Loopback is shared by every user and program of the machine: the page, its websocket and its
    downloads need the key the server printed in its URL (a cookie once the page is open); only
    textual-serve's own scripts and styles under /static/ are served to anyone.
    """
    if path.startswith(STATIC_PREFIX):
        return None
    if presented and hmac.compare_digest(presented.encode(), key.encode()):
        return None
    return "no key (open the URL `flightlog browse --web` printed: it carries the key)"


def guard(listen: Listen, key: str) -> Middleware:
    """The aiohttp middleware that answers a refused request with 403 and one line saying why, and
    keeps the key of a page opened with it in a cookie (its websocket then carries the key)."""
    cookie = f"{KEY_PARAM}-{listen.port}"

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.query.get(KEY_PARAM)
        why = refusal(listen, request.headers.get("Host"), request.headers.get("Origin"), request.path)
        why = why or key_refusal(request.path, given or request.cookies.get(cookie), key)
        if why is not None:
            log.warning("refused %s %s: %s", request.method, request.path, why)
            return web.Response(status=403, text=f"flightlog browse --web refused this request: {why}\n")
        response = await handler(request)
        if given and not response.prepared:
            response.set_cookie(cookie, key, httponly=True, samesite="Strict", path="/")
        return response

    return check


def local_templates(folder: Path) -> Path:
    """textual-serve's page without the web fonts it fetches from Google (copied into `folder`)."""
    source = Path(textual_serve.server.__file__).parent / "templates"
    for page in source.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        (folder / page.name).write_text(FONTS.sub("", text), encoding="utf-8")
    return folder


class GuardedServer(Server):
    """textual-serve's server with the guard in front of every route."""

    def __init__(self, command: str, listen: Listen, title: str) -> None:
        self.listen = listen
        self.key = secrets.token_urlsafe(24)
        """What a page must present (in its URL, then as a cookie): loopback is every local user's."""
        self._templates = tempfile.mkdtemp(prefix="flightlog-web-")
        super().__init__(
            command,
            host=listen.host,
            port=listen.port,
            title=title,
            public_url=f"http://{listen.public_netloc}",
            templates_path=local_templates(Path(self._templates)),
        )

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(guard(self.listen, self.key))
        return app

    @property
    def page_url(self) -> str:
        """The page's address with the key in it (the one line a user copies)."""
        return f"{self.public_url}/?{KEY_PARAM}={self.key}"

    async def on_startup(self, app: web.Application) -> None:
        print(f"flightlog browse: serving the Ledger's browser on {self.page_url}", flush=True)
        print("Ctrl-C stops it.", flush=True)

    def serve(self, debug: bool = False) -> None:
        try:
            super().serve(debug=debug)
        finally:
            shutil.rmtree(self._templates, ignore_errors=True)
