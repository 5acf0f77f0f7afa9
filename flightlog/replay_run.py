"""A hermetic serve-back of a recording, running beside a command (`run --replay`, the pytest plugin).

`serving` starts the serve-replay proxy (forward listener plus reverse ones for the model APIs, as
`run` has when recording) on a thread of this process and yields where it listens; `ReplayServer.env`
gives the child the same variables `run` sets for recording. `recording_proxy` starts a real recording
proxy (`flightlog proxy`) in a subprocess with its own FLIGHTLOG_HOME, for recording a test the first
time and for `--record-missing`, where `go_live` sends a missed request through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from addons.proxy_env import Listener, ProxyState, proxy_env
from flightlog import proxy_process
from flightlog.errors import CommandError
from flightlog.proxy_process import PROVIDER_MODES
from readback.match_book import Book, ReplayReport
from readback.matching import DEFAULT_STRATEGIES, Rules
from readback.recorded import Selection, iter_exchanges, select_action_ids
from readback.ws_player import conversation
from recording.identity import EMPTY, Identity

if TYPE_CHECKING:
    from mitmproxy import http

    from addons.serve_replay import GoLive, ServeReplay

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "upgrade"}
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What to serve back and how to match it."""

    ledger_url: str
    blobs_url: str
    selection: Selection = field(default_factory=Selection)
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    rules: Rules | None = None
    timing: str = "fixed"
    chunk_delay: float = 0.0
    refuse_status: int = 404


@dataclass
class ReplayServer:
    """The running serve-back: its addon (whose matcher holds the live report) and its listeners."""

    addon: ServeReplay
    book: Book
    listeners: tuple[Listener, ...]
    ca: Path
    recorded: int

    def env(self, identity: Identity = EMPTY) -> dict[str, str]:
        """The variables `run` sets for a child, pointed at this serve-back."""
        forward = next(x for x in self.listeners if x.mode.startswith("regular"))
        reverse = tuple(x for x in self.listeners if x.mode.startswith("reverse"))
        return proxy_env((forward.host, forward.port), self.ca, identity, reverse)

    @property
    def report(self) -> ReplayReport:
        return self.book.report


@contextmanager
def serving(plan: Plan, confdir: Path, live: GoLive | None = None) -> Iterator[ReplayServer]:
    """Serve the plan's recording back until the block ends; the report is final afterwards."""
    # deferred: mitmproxy (serve_replay) loads slowly; importing this module stays cheap
    from addons.serve_replay import ServeReplay, build_master
    from storage.ledger import open_ledger

    ledger = open_ledger(plan.ledger_url, plan.blobs_url)
    try:
        ids = select_action_ids(ledger.engine, plan.selection)
        exchanges = list(iter_exchanges(ledger.engine, ledger.events, ids))
        book = Book(exchanges, ledger.payload, plan.strategies, plan.rules)
        talks = {
            x.action_id: c
            for x in exchanges
            if x.response is not None
            and x.response.status == 101
            and (c := conversation(x.websocket, ledger.payload)) is not None
        }
        addon = ServeReplay(book, ledger.payload, live=live, timing=plan.timing, conversations=talks)
        holder: dict[str, Any] = {}
        failed: list[BaseException] = []

        def run() -> None:
            async def main() -> None:
                master = build_master(addon, "127.0.0.1", 0, str(confdir), ("regular", *PROVIDER_MODES))
                master.options.update(
                    serve_replay_chunk_delay=plan.chunk_delay, serve_replay_refuse_status=plan.refuse_status
                )
                holder["master"], holder["loop"] = master, asyncio.get_running_loop()
                await master.run()

            try:
                asyncio.run(main())
            except BaseException as e:  # reported on the caller's thread
                failed.append(e)
                addon.ready.set()

        thread = threading.Thread(target=run, name="flightlog-replay", daemon=True)
        thread.start()
        if not addon.ready.wait(30) or failed or not addon.listeners:
            raise CommandError(f"the replay proxy did not start: {failed[0] if failed else 'timed out'}")
        listeners = tuple(Listener(mode, host, port) for mode, host, port in addon.listeners)
        try:
            yield ReplayServer(addon, book, listeners, confdir / "mitmproxy-ca-cert.pem", len(exchanges))
        finally:
            loop, master = holder.get("loop"), holder.get("master")
            if loop is not None and master is not None:
                loop.call_soon_threadsafe(master.shutdown)
            thread.join(30)
            book.finish()
    finally:
        ledger.close()


# ---- recording: a real proxy in a subprocess ------------------------------------------------------


@dataclass
class Recorder:
    """A running recording proxy and where to reach it."""

    proc: subprocess.Popen[bytes]
    state: ProxyState
    home: Path

    def env(self, identity: Identity = EMPTY) -> dict[str, str]:
        forward = self.state.forward
        assert forward is not None
        reverse = tuple(x for x in self.state.listeners if x.mode.startswith("reverse"))
        return proxy_env((forward.host, forward.port), self.state.ca, identity, reverse)

    def url(self, identity: Identity = EMPTY) -> str:
        return self.env(identity)["HTTP_PROXY"]


@contextmanager
def recording_proxy(
    ledger_url: str, blobs_url: str, confdir: Path | None = None, timeout: float = 30.0
) -> Iterator[Recorder]:
    """`flightlog proxy` recording into this Ledger, with a FLIGHTLOG_HOME of its own (its CA copied from
    `confdir` when given, so clients keep trusting the same CA); stopped (drained) when the block ends."""
    home = Path(tempfile.mkdtemp(prefix="flightlog-record-"))
    if confdir is not None and (confdir / "mitmproxy-ca.pem").exists():
        shutil.copytree(confdir, home / "mitmproxy")
    env = proxy_process.child_env(
        {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs_url}
    )
    log = home / "proxy.log"
    with log.open("wb") as out:
        proc = proxy_process.spawn(env, out)
    try:
        yield Recorder(proc, proxy_process.wait_for_state(home, proc, timeout, log), home)
    finally:
        proxy_process.stop(proc)
        shutil.rmtree(home, ignore_errors=True)


def go_live(recorder: Recorder, identity: Identity = EMPTY, timeout: float = 60.0) -> GoLive:
    """How `--record-missing` answers a miss: the request sent through the recording proxy, whose answer
    is recorded there and given to the client whole (decoded, so its encoding header is dropped)."""
    import httpx
    from mitmproxy import http

    client = httpx.AsyncClient(
        proxy=recorder.url(identity), verify=str(recorder.state.ca), timeout=timeout, trust_env=False
    )

    async def send(req: http.Request) -> http.Response | None:
        headers = [
            (n, v) for n, v in req.headers.fields if n.decode("latin-1").lower() not in (*HOP_BY_HOP, "host")
        ]
        try:
            answer = await client.request(req.method, req.url, headers=headers, content=req.raw_content)
        except httpx.HTTPError as e:
            return http.Response.make(502, f"flightlog --record-missing: {e}".encode())
        fields = [
            (n.encode("latin-1"), v.encode("latin-1"))
            for n, v in answer.headers.items()
            if n.lower() not in ("content-length", "transfer-encoding", "content-encoding", "connection")
        ]
        return http.Response.make(answer.status_code, answer.content, fields)

    return send


MISSED_EXIT = 3
"""`run --replay`'s exit code when COMMAND succeeded but a request had no recorded answer."""


def run_replayed(
    command: list[str],
    plan: Plan,
    confdir: Path,
    identity: Identity = EMPTY,
    record_missing: bool = False,
    report_json: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> int:
    """Run COMMAND against the serve-back (misses live through a recording proxy when asked); report on
    stderr after it (its own output stays as it was); return its exit code, or MISSED_EXIT on a miss."""
    with contextlib.ExitStack() as stack:
        live = None
        if record_missing:
            recorder = stack.enter_context(recording_proxy(plan.ledger_url, plan.blobs_url, confdir))
            live = go_live(recorder, identity)
        server = stack.enter_context(serving(plan, confdir, live))
        misses = "misses go live and are recorded" if record_missing else "nothing goes live"
        print(
            f"flightlog run --replay: {server.recorded} recorded exchanges, matching"
            f" {','.join(plan.strategies)}; {misses}",
            file=sys.stderr,
            flush=True,
        )
        try:
            env = {**os.environ, **server.env(identity), **(extra_env or {})}
            code = subprocess.call(command, env=env)
        except FileNotFoundError as e:
            raise CommandError(f"command not found: {command[0]}") from e
    report = server.report
    print(report.render(), file=sys.stderr, flush=True)
    if report_json is not None:
        report_json.write_text(json.dumps(report.to_json(), indent=2))
    return code if code != 0 or not report.misses else MISSED_EXIT
