"""Build and run mitmproxy's DumpMaster with flightlog's addons, its confdir under FLIGHTLOG_HOME.

`run_proxy(config)` blocks until SIGINT/SIGTERM (or `stop()`); the addons' `done` hooks drain the
writer's queue into the Ledger before it returns. On start it prints one line saying where it
listens, where it records and how to trust the CA, and writes `proxy.json` in FLIGHTLOG_HOME so
`flightlog run` and `flightlog env` can find the running proxy. As one of `--workers N` it does
neither: it tells its supervisor (`addons.workers`), which speaks for all of them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from addons.attempts import Attempts
from addons.capture import Capture
from addons.certificate_store import load_ca_before_listening
from addons.choke_point import ChokePoint
from addons.egress_policy import Egress
from addons.errors import AddonError
from addons.hook_dispatch import skip_idle_addons
from addons.listener_hops import ListenerHops
from addons.listening import HeldPorts
from addons.local_routes import LocalRoutes
from addons.proxy_config import ProxyConfig
from addons.published import Ready
from addons.seal import Seal
from addons.sync_paths import SyncPaths
from addons.websockets import WebSocketCapture
from egress.live import LOG_NAME as POLICY_LOG
from storage.locations import private_home

if TYPE_CHECKING:
    from mitmproxy import connection, http, tls
    from mitmproxy.addonmanager import Loader
    from mitmproxy.proxy import server_hooks

    from addons.worker_link import WorkerLink

HOOKS = (
    "load",
    "configure",
    "running",
    "done",
    "http_connect",
    "http_connect_error",
    "server_connect",
    "server_connect_error",
    "tls_clienthello",
    "tls_failed_client",
    "client_disconnected",
    "requestheaders",
    "request",
    "responseheaders",
    "response",
    "error",
    "websocket_message",
    "websocket_end",
)
"""Every mitmproxy hook one of flightlog's addons implements; `Flightlog` forwards exactly these."""


class Flightlog:
    """flightlog's addons in hook order (own routes, listener hops, sync paths, capture) behind one
    mitmproxy addon.

    mitmproxy walks every addon, and every child of one, for each hook of each flow (a generator
    step, `hasattr`, `getattr`, an argument list), and pays a coroutine and a context manager per
    top-level addon. So the parts are not exposed as children: this addon calls each part's hook
    itself, in order, and a part that returns an awaitable is awaited before the next part runs,
    exactly as mitmproxy would.
    """

    def __init__(self, *extra: object) -> None:
        self.capture = capture = Capture()
        self.egress = egress = Egress(capture)
        attempts = Attempts(capture.put, capture.identity_of, capture.outbound, capture.ignored)
        # a hop is the listener's request before anything judges or records it; egress judges a
        # request before capture relays it (its `bodies`) and after capture named its exchange
        # a sealed command's identity is the run's before any part reads one (`addons.seal`)
        routes = LocalRoutes(judge=egress.judge_upstream)  # the door's upstreams: the same judge
        first = [Seal(), routes, ListenerHops(), SyncPaths(capture), egress.bodies]
        self.parts: list[object] = [*first, capture, WebSocketCapture(capture), attempts, egress, *extra]
        self._hooks = {
            name: [hook for part in self.parts if callable(hook := getattr(part, name, None))]
            for name in HOOKS
        }
        self._finished = False

    def _call(self, name: str, *args: object) -> Awaitable[None] | None:
        hooks = self._hooks[name]
        for i, hook in enumerate(hooks):
            result = hook(*args)
            if result is not None and inspect.isawaitable(result):
                return self._finish(result, hooks[i + 1 :], args)
        return None

    @staticmethod
    async def _finish(
        pending: Awaitable[object], rest: list[Callable[..., object]], args: tuple[object, ...]
    ) -> None:
        await pending
        for hook in rest:
            result = hook(*args)
            if result is not None and inspect.isawaitable(result):
                await result

    def load(self, loader: Loader) -> None:
        self._call("load", loader)

    def configure(self, updated: set[str]) -> None:
        self._call("configure", updated)

    def running(self) -> Awaitable[None] | None:
        return self._call("running")

    def done(self) -> Awaitable[None] | None:
        """Once only: `serve` calls it again for the case mitmproxy skips it (stopped while starting)."""
        if self._finished:
            return None
        self._finished = True
        return self._call("done")

    async def start(self) -> None:
        """Start every part that has work to bring up before the proxy listens (the writer, the relay)."""
        for part in self.parts:
            start = getattr(part, "start", None)
            if callable(start):
                await start()

    def http_connect(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("http_connect", flow)

    def http_connect_error(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("http_connect_error", flow)

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> Awaitable[None] | None:
        return self._call("server_connect", data)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> Awaitable[None] | None:
        return self._call("server_connect_error", data)

    def tls_failed_client(self, data: tls.TlsData) -> Awaitable[None] | None:
        return self._call("tls_failed_client", data)

    def client_disconnected(self, client: connection.Client) -> Awaitable[None] | None:
        return self._call("client_disconnected", client)

    def tls_clienthello(self, data: tls.ClientHelloData) -> Awaitable[None] | None:
        return self._call("tls_clienthello", data)

    def requestheaders(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("requestheaders", flow)

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("request", flow)

    def responseheaders(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("responseheaders", flow)

    def response(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("response", flow)

    def error(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("error", flow)

    def websocket_message(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("websocket_message", flow)

    def websocket_end(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self._call("websocket_end", flow)


def addons(*extra: object) -> list[object]:
    """What to add to a master (or `mitmdump -s`): `Flightlog`, egress's hooks for what is not an
    HTTP request, and last the choke point that lets nothing out without their verdict."""
    flightlog = Flightlog(*extra)
    return [flightlog, flightlog.egress.connections, choke_point(flightlog)]


def choke_point(flightlog: Flightlog) -> ChokePoint:
    """The choke point over `flightlog`'s judge (`addons.choke_point`): to be added last."""
    egress = flightlog.egress
    return ChokePoint(
        egress.verdicts,
        lambda exchange, decision: egress.record_refusal(exchange, decision, None, None, b"", True),
    )


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("flightlog")
    if not logger.handlers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


async def serve(
    config: ProxyConfig,
    announce: Callable[[str], None] | None = None,
    link: WorkerLink | None = None,
    held: HeldPorts | None = None,
) -> None:
    """Run the proxy until SIGINT/SIGTERM; the queue is drained before this returns. With `link`,
    this is one of several workers (`addons.workers`): it binds its ports with SO_REUSEPORT, reports
    to the supervisor instead of writing `proxy.json`, and stops when the supervisor's line ends.
    `held`: the listening addresses the CLI bound (`flightlog.ports`), which the listeners take."""
    from mitmproxy import exceptions, options
    from mitmproxy.tools.dump import DumpMaster

    private_home(config.home)
    config.confdir.mkdir(parents=True, exist_ok=True)
    _log_to_stderr()
    opts = options.Options(
        listen_host=config.listen_host,
        listen_port=config.listen_port,
        mode=config.all_modes,
        confdir=str(config.confdir),
    )
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    skip_idle_addons(master.addons)
    say = announce or (lambda line: print(line, file=sys.stderr))
    flightlog = Flightlog(Ready(config, say, link))
    master.addons.add(flightlog, flightlog.egress.connections, choke_point(flightlog))  # the choke point last
    try:
        master.options.update(
            stream_large_bodies=config.max_request_body,
            flightlog_ledger=config.ledger_url,
            flightlog_blobs=config.blobs_url,
            flightlog_secrets=config.secrets,
            flightlog_secret_env=list(config.secret_env),
            flightlog_sync_path=list(config.sync_paths),
            flightlog_stream_grace=config.stream_grace,
            flightlog_max_request_body=config.max_request_body,
            flightlog_redact_auth_headers=config.redact_auth_headers,
            flightlog_collector=config.collector,
            flightlog_stats_file=config.stats_file,
            flightlog_commit_ms=config.commit_ms,
            flightlog_directory=config.directory,
            flightlog_open=config.open_mode,
            flightlog_local_commands=config.local_commands,
            flightlog_outbound_hosts=config.outbound_hosts,
            flightlog_policy=config.policy,
        )
        master.options.set(*config.extra)
        load_ca_before_listening(master)
    except (exceptions.OptionsError, KeyError) as e:
        raise AddonError(str(e)) from e
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()

    def stop() -> None:
        stopped.set()
        master.shutdown()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    if check := master.addons.get("errorcheck"):
        check.shutdown_if_errored = _one_line_startup_errors(check, link)
    if held is not None and flightlog.capture.listening is not None:
        flightlog.capture.listening.held = held
    if link is not None and flightlog.capture.listening is not None:
        flightlog.capture.listening.reuse_port = True  # the worker's ports are shared with the others
        flightlog.capture.listening.udp = link.udp
        flightlog.capture.looks_itself = flightlog.egress.looks_itself = False  # the supervisor looks
        logging.getLogger(POLICY_LOG).disabled = True  # and says what a policy edit did, once
        link.watch(loop, stop, flightlog.egress.look_at_files)  # capture's files, then the policy's
    await flightlog.start()  # the writer runs before the port accepts a connection
    if not stopped.is_set():  # a stop asked for until now: mitmproxy's run() would clear it and serve on
        await master.run()
    finishing = flightlog.done()  # mitmproxy skips `done` when stopped while starting servers
    if finishing is not None:
        await finishing
    if (drained := flightlog.capture.drained) is not None:  # one line: what the stop drained
        link.stopped(drained.to_json()) if link is not None else say(drained.line())


def _one_line_startup_errors(
    check: Any, link: WorkerLink | None = None
) -> Callable[[], Coroutine[Any, Any, None]]:
    """mitmproxy's startup check, saying what failed (a port in use, a bad mode) in one line (to the
    supervisor, in a worker: it prints the first worker's, not one per worker)."""

    async def shutdown_if_errored() -> None:
        await asyncio.sleep(0)  # let pending log records arrive, as mitmproxy's own check does
        if check.logger.has_errored:
            first = check.logger.has_errored[0].getMessage().strip().splitlines()[0]
            if link is not None:
                link.failed(f"the proxy did not start: {first}")
            else:
                print(f"flightlog: the proxy did not start: {first}", file=sys.stderr)
            sys.exit(1)

    return shutdown_if_errored


def run_proxy(
    config: ProxyConfig, announce: Callable[[str], None] | None = None, held: HeldPorts | None = None
) -> None:
    """Blocking entry for the CLI."""
    asyncio.run(serve(config, announce, held=held))
