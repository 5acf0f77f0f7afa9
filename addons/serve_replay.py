"""A hermetic proxy: every request is answered from the Ledger or refused, and nothing reaches the network.

`Matcher` is the plain logic: recorded exchanges indexed by method + URL + body hash and by method +
URL, each consumed once, in recorded order, the exact key first. `ServeReplay` is the thin mitmproxy
shell: it answers every request in the `request` hook (so with `connection_strategy=lazy` no upstream
connection is ever wanted) and refuses any upstream connection that is attempted anyway.

Streamed answers (SSE to an HTTP/1 client) are played event by event by `replay_player.Player`, a
loopback server inside this process that the flow is pointed at; the Ledger keeps no per-chunk
timing, so chunks follow each other at once unless a pace is set (`serve_replay_chunk_delay`). The
only upstream connection ever allowed is to that player.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from addons.errors import ServeReplayError
from addons.flow_notes import PLAYBACK
from formats import sse
from readback.match_book import Book, ReplayReport
from readback.recorded import Exchange, PayloadReader, body, canonical_url
from readback.replay_answers import MARK, answer_fields, is_stream, refusal
from readback.replay_player import TOKEN, Playback, Player, recorded_duration
from readback.ws_player import Conversation
from recording.identity import PATH_PREFIX, from_path
from recording.redaction.redact import Redactor
from storage.heads import Fields

if TYPE_CHECKING:
    from mitmproxy import http
    from mitmproxy.addonmanager import Loader
    from mitmproxy.proxy.server_hooks import ServerConnectionHookData

log = logging.getLogger("flightlog.serve_replay")
Conceal = Callable[[str, bytes, str | None], tuple[str, bytes]]
GoLive = Callable[["http.Request"], Awaitable["http.Response | None"]]
"""Turns a live request's URL and body into their recorded spelling (secret values -> names)."""


def check_modes(modes: Sequence[str]) -> None:
    """Every mode spec parses (`regular`, `reverse:URL`, with an optional `@PORT`)."""
    from mitmproxy.proxy import mode_specs

    for spec in modes:
        try:
            mode_specs.ProxyMode.parse(spec)
        except ValueError as e:
            raise ServeReplayError(f"--mode {spec}: {e}") from e


def check_listen(host: str, port: int) -> None:
    """The address can be bound now (so a busy port is one clear line, not a startup failure)."""
    import socket

    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as e:
            raise ServeReplayError(f"cannot listen on {host}:{port}: {e.strerror}") from e


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class Report:
    """What happened while serving: matches, and every way the live traffic diverged from the recording."""

    by_body: list[str] = field(default_factory=list)
    by_url: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    upstream_blocked: int = 0

    @property
    def divergences(self) -> int:
        return len(self.by_url) + len(self.refused) + len(self.unused) + self.upstream_blocked

    def to_json(self) -> dict[str, Any]:
        return {
            "answered": len(self.by_body) + len(self.by_url),
            "matched_exactly": len(self.by_body),
            "matched_by_url_only": self.by_url,
            "refused": self.refused,
            "not_requested": self.unused,
            "upstream_connections_blocked": self.upstream_blocked,
            "divergences": self.divergences,
        }

    def render(self) -> str:
        lines = [
            f"serve-replay: {len(self.by_body) + len(self.by_url)} answered from the Ledger"
            f" ({len(self.by_body)} exactly, {len(self.by_url)} by method and URL only),"
            f" {len(self.refused)} refused, {len(self.unused)} recorded but not requested,"
            f" {self.upstream_blocked} upstream connections blocked"
        ]
        lines += [f"  body differed: {x}" for x in self.by_url]
        lines += [f"  refused: {x}" for x in self.refused]
        lines += [f"  not requested: {x}" for x in self.unused]
        return "\n".join(lines)


class Matcher:
    """Recorded exchanges, each answering at most one live request, the oldest first."""

    def __init__(self, exchanges: Sequence[Exchange]) -> None:
        self.exchanges = list(exchanges)
        self.used = [False] * len(self.exchanges)
        self.exact: dict[tuple[str, str, str], deque[int]] = {}
        self.loose: dict[tuple[str, str], deque[int]] = {}
        self.report = Report()
        for i, x in enumerate(self.exchanges):
            method, url = (x.request.method or "").upper(), canonical_url(x.request.url or "")
            sha = x.request.payload_sha256 if x.request.payload_state == "complete" else None
            self.exact.setdefault((method, url, sha or digest(b"")), deque()).append(i)
            self.loose.setdefault((method, url), deque()).append(i)

    def _take(self, queue: deque[int] | None) -> int | None:
        while queue:
            i = queue.popleft()
            if not self.used[i]:
                self.used[i] = True
                return i
        return None

    def match(self, method: str, url: str, body_bytes: bytes, fields: Fields = ()) -> Exchange | None:
        """The recorded exchange that answers this request, consumed; None (and noted) when none does."""
        method, url = method.upper(), canonical_url(url)
        label = f"{method} {url}"
        i = self._take(self.exact.get((method, url, digest(body_bytes))))
        if i is not None:
            self.report.by_body.append(label)
            return self.exchanges[i]
        i = self._take(self.loose.get((method, url)))
        if i is not None:
            self.report.by_url.append(f"{label} (recorded action {self.exchanges[i].action_id})")
            return self.exchanges[i]
        self.report.refused.append(label)
        return None

    last_miss: str | None = None

    def finish(self) -> Report:
        """The report, with every recorded exchange nobody asked for named."""
        self.report.unused = [
            f"{x.request.method} {x.request.url} (action {x.action_id})"
            for x, used in zip(self.exchanges, self.used, strict=True)
            if not used
        ]
        return self.report


class ServeReplay:
    """The mitmproxy addon: answers each request from the `Matcher`, or refuses it."""

    def __init__(
        self,
        matcher: Matcher | Book,
        read: PayloadReader,
        conceal: Conceal | None = None,
        live: GoLive | None = None,
        timing: str = "fixed",
        conversations: dict[str, Conversation] | None = None,
    ) -> None:
        self.matcher = matcher
        self.read = read
        self.conceal = conceal
        self.live = live  # --record-missing: how a miss is sent live (through the recording proxy)
        self.timing = timing  # "fixed" (serve_replay_chunk_delay) or "recorded" (the recorded duration)
        self.conversations = conversations or {}  # WebSocket messages by upgrade action
        self.listening: list[tuple[str, int]] = []
        self.listeners: list[tuple[str, str, int]] = []  # (mode spec, host, port)
        self.ready = threading.Event()
        self.report: Report | ReplayReport | None = None
        self.player = Player()

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "serve_replay_refuse_status",
            int,
            404,
            "HTTP status answered to a request that has no recorded answer (never forwarded).",
        )
        loader.add_option(
            "serve_replay_chunk_delay",
            float,
            0.0,
            "Seconds between the chunks of a streamed (SSE) answer; 0 sends them one after another at once.",
        )

    def configure(self, updated: set[str]) -> None:
        """Refuse bad values the mitmproxy way (`OptionsError` makes the options update fail whole)."""
        from mitmproxy import ctx
        from mitmproxy.exceptions import OptionsError

        if (
            "serve_replay_refuse_status" in updated
            and not 400 <= ctx.options.serve_replay_refuse_status <= 599
        ):
            raise OptionsError("serve_replay_refuse_status must be an HTTP error status (400-599)")
        if "serve_replay_chunk_delay" in updated and not 0 <= ctx.options.serve_replay_chunk_delay <= 60:
            raise OptionsError("serve_replay_chunk_delay is between 0 and 60 seconds")

    async def running(self) -> None:
        from mitmproxy import ctx

        await self.player.start()
        server = ctx.master.addons.get("proxyserver")
        self.listening = [(a[0], a[1]) for a in server.listen_addrs()]
        self.listeners = [
            (i.mode.full_spec, i.listen_addrs[0][0], i.listen_addrs[0][1])
            for i in server.servers
            if i.listen_addrs
        ]
        self.ready.set()

    async def request(self, flow: http.HTTPFlow) -> None:
        from mitmproxy import ctx, http

        req = flow.request
        self._through_own_listener(req)
        if req.path.startswith(PATH_PREFIX):  # the identity prefix `run` puts in base URLs
            req.path = from_path(req.path)[1]
        url, raw = req.url, req.raw_content or b""
        if self.conceal is not None:
            url, raw = self.conceal(url, raw, req.headers.get("content-encoding"))
        exchange = self.matcher.match(req.method, url, raw, tuple(req.headers.fields))
        http2 = req.http_version.startswith("HTTP/2")
        if exchange is None:
            detail = getattr(self.matcher, "last_miss", None)
            if self.live is not None and isinstance(self.matcher, Book):
                answer = await self.live(req)
                if answer is not None:
                    self.matcher.went_live()
                    flow.response = answer
                    return
            if detail:
                log.warning("flightlog replay: %s", detail)
            content, fields = refusal(req.method, req.pretty_url, detail)
            status = ctx.options.serve_replay_refuse_status
            flow.response = http.Response.make(status, content, fields)
            return
        response, head = exchange.response, exchange.response_head
        if response is None or head is None or response.status is None:
            error = (response.error if response is not None else None) or "no answer was recorded"
            content = f"recorded without an answer: {error}".encode()
            flow.response = http.Response.make(502, content, ((MARK, b"recorded-error"),))
            return
        played = self.conversations.get(exchange.action_id)
        if response.status == 101 and played is not None and not http2 and self.player.address is not None:
            self._redirect(flow, self.player.put(played))
            return
        content = await asyncio.to_thread(body, response, self.read)
        took = recorded_duration(exchange) if self.timing == "recorded" else 0.0
        if not http2 and is_stream(head) and self.player.address is not None:
            chunks = tuple(sse.blocks(content))  # one event a chunk, as it was streamed
            self.play(flow, Playback(response.status, head.start[2], head.fields, chunks), took)
            return
        if took:
            await asyncio.sleep(took)
        flow.response = http.Response(
            http_version=req.http_version.encode(),
            status_code=response.status,
            reason=head.start[2],
            headers=http.Headers(answer_fields(head.fields, len(content), http2)),
            content=content,
            trailers=None,
            timestamp_start=flow.request.timestamp_start,
            timestamp_end=None,
        )

    def _through_own_listener(self, req: http.Request) -> None:
        """A request the forward listener got for one of our reverse listeners (a client that follows
        both HTTP_PROXY and OPENAI_BASE_URL) is the request that listener stands for, as when recording."""
        from mitmproxy.proxy.mode_specs import ProxyMode, ReverseMode

        if req.host not in ("127.0.0.1", "localhost", "::1"):
            return
        for spec, _, port in self.listeners:
            mode = ProxyMode.parse(spec) if spec.startswith("reverse:") and port == req.port else None
            if isinstance(mode, ReverseMode):
                req.scheme, (req.host, req.port) = mode.scheme, mode.address
                return

    def play(self, flow: http.HTTPFlow, playback: Playback, took: float = 0.0) -> None:
        """Send the flow to the in-process player, which streams the recorded chunks back.

        With recorded timing the chunks are spread evenly over the answer's recorded duration.
        """
        from mitmproxy import ctx

        assert self.player.address is not None
        delay = ctx.options.serve_replay_chunk_delay
        if took and len(playback.chunks) > 1:  # the first chunk at once, the last at the recorded end
            delay = took / (len(playback.chunks) - 1)
        token = self.player.put(
            Playback(playback.status, playback.reason, playback.fields, playback.chunks, delay)
        )
        self._redirect(flow, token)

    def _redirect(self, flow: http.HTTPFlow, token: str) -> None:
        assert self.player.address is not None
        req = flow.request
        req.scheme = "http"
        req.data.host, req.port = self.player.address
        req.headers[TOKEN] = token
        PLAYBACK.put(flow, token)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if PLAYBACK.get(flow) and flow.response is not None:
            flow.response.stream = True

    def server_connect(self, data: ServerConnectionHookData) -> None:
        """A last guard: any upstream connection but the one to the in-process player is refused."""
        if data.server.address is not None and tuple(data.server.address) == self.player.address:
            return
        data.server.error = "flightlog serve-replay never connects upstream"
        self.matcher.report.upstream_blocked += 1

    async def done(self) -> None:
        await self.player.stop()
        self.report = self.matcher.finish()
        if isinstance(self.report, ReplayReport):
            self.report.websocket = [d for c in self.conversations.values() for d in c.diverged]
        log.info(self.report.render())


def concealer(secrets: dict[str, str]) -> Conceal:
    """Spell a live request the way capture recorded it (secret values replaced by their names)."""
    redactor = Redactor(secrets)

    def conceal(url: str, raw: bytes, content_encoding: str | None) -> tuple[str, bytes]:
        return redactor.redact_url(url)[0], redactor.redact_body(raw, content_encoding)[0]

    return conceal


def build_master(
    addon: ServeReplay, listen_host: str, listen_port: int, confdir: str, modes: Sequence[str] = ("regular",)
) -> Any:
    """A mitmproxy `DumpMaster` with only `addon` answering, lazy upstream connections, no cert sniffing.

    `modes` are mitmproxy mode specs: `regular` (a forward proxy) and `reverse:URL` (clients call the
    listener as if it were URL, e.g. an SDK's base URL), each optionally `@PORT`.
    """
    from mitmproxy import options
    from mitmproxy.tools.dump import DumpMaster

    from addons.certificate_store import load_ca_before_listening

    opts = options.Options(
        listen_host=listen_host, listen_port=listen_port, confdir=confdir, mode=list(modes)
    )
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    master.addons.add(addon)
    opts.update(connection_strategy="lazy", upstream_cert=False)
    load_ca_before_listening(master)
    return master
