"""`flightlog proxy --workers N`: N proxy processes on the same ports, under one supervisor.

mitmproxy runs on one core, so one proxy process is bounded by one event loop. The supervisor (the
`flightlog proxy` process itself) fixes every listener's port and holds it (`addons.shared_ports`),
creates the CA once (N workers creating it at once would each write a different one), then starts
N workers (`python -m addons.workers FD`), each a whole proxy: its own mitmproxy with SO_REUSEPORT
listeners, its own writer process and collector id (the next free slot of `recording.
collector`, or `--collector ID` then `ID#1`, `ID#2`...), all recording into the one Ledger. Each
event is written once, by the writer of the worker that carried it.

Once every worker listens, the supervisor prints the one start line and writes `proxy.json` with
its own pid, as a single proxy does, so `flightlog run` and `flightlog env` see no difference.
It also looks at the secrets and price files the workers named, once a second for all of them,
and nudges every worker to re-read them when one changed (`processing_watch`): an idle proxy
wakes once a second, however many workers it has. The egress policy it reads itself as well, to
say once for the proxy what an edit did (the workers re-read it quietly, `egress.live`).
SIGINT/SIGTERM on it stops every worker (SIGTERM) and waits while each drains its writer.

A worker that fails to start stops them all: the first one's reason is the one error line. A
worker that dies later is restarted (one line saying so; after a quick death, again after
`RESTART_DELAY`, doubling to `RESTART_MAX`): the others keep serving the shared ports meanwhile,
and what the dead worker had handed to its writer process is still drained by that process.
Restarting keeps the proxy up for every other connection, where stopping all would turn one crash
into an outage.
"""

from __future__ import annotations

import contextlib
import math
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from addons.ai_listeners import AiListener
from addons.errors import AddonError
from addons.listening import HeldPorts
from addons.proxy_config import ProxyConfig
from addons.published import forget_state, start_line, write_state
from addons.shared_ports import PortPlan, plan_ports
from addons.stopping import Drained
from addons.worker_link import Lines, WorkerLink, send
from egress.live import LivePolicy, policy_path
from recording.file_stamps import Stamp, stamp
from recording.processing_watch import INTERVAL
from storage.locations import private_home

WORKER_MODULE = "addons.workers"
RESTART_DELAY = 0.5
RESTART_MAX = 30.0
STEADY = 10.0
"""A worker that ran this long before dying is restarted after the first delay again."""
STOP_TIMEOUT = 90.0
"""How long stopping waits for the workers' drains (each is bounded by its own drain timeout)."""


def config_to_json(config: ProxyConfig) -> dict[str, Any]:
    """A worker's configuration as JSON for its socket (never its argv: a Ledger password shows in `ps`)."""
    return {**asdict(config), "home": str(config.home)}


def config_from_json(data: dict[str, Any]) -> ProxyConfig:
    """`config_to_json` read back: lists become tuples again, the model API listeners `AiListener`s."""
    tuples = {k: tuple(v) for k, v in data.items() if isinstance(v, list)}
    ai = tuple(AiListener(**x) for x in data.get("ai_listeners", ()))
    return ProxyConfig(**{**data, **tuples, "ai_listeners": ai, "home": Path(data["home"])})


def worker_config(config: ProxyConfig, plan: PortPlan, index: int) -> ProxyConfig:
    """Worker `index`'s configuration: the planned ports, its own collector id if one was given,
    and its own counters file (the bench reads one per worker)."""
    stats = config.stats_file
    if stats:
        path = Path(stats)
        stats = str(path.with_name(f"{path.stem}-{index}{path.suffix}"))
    collector = config.collector and (config.collector if index == 0 else f"{config.collector}#{index}")
    return replace(
        config,
        modes=plan.modes[: len(config.modes)],  # the model APIs' listeners follow, on their own ports
        listen_port=plan.listen_port,
        collector=collector,
        stats_file=stats,
    )


def ensure_ca(confdir: Path) -> None:
    """mitmproxy's CA in `confdir`, made now if missing (as mitmproxy itself would, same names)."""
    if (confdir / "mitmproxy-ca.pem").exists():  # the file mitmproxy looks for (key and certificate)
        return
    from mitmproxy.certs import CertStore

    CertStore.from_store(confdir, "mitmproxy", 2048)


@dataclass
class Worker:
    """One worker process and the supervisor's end of its line."""

    index: int
    proc: subprocess.Popen[bytes]
    sock: socket.socket
    started: float
    lines: Lines = field(default_factory=Lines)
    listeners: list[dict[str, Any]] | None = None


def spawn(config: ProxyConfig, index: int) -> Worker:
    """Start worker `index` and send it its configuration over its line.

    The worker leads a session of its own. Linux shares the CPU between sessions first
    (autogroups), then between the processes of each: N workers left in the caller's session shared
    one share with the caller's shell, load generator and upstream, while each worker's writer,
    already in a session of its own, waited on the run queue behind them. On this 2-core machine
    with both cores busy (bench.workers, 2 workers, SQLite), the writers were runnable but not
    running in a fifth of samples and the answer->commit p99 was many times what it is with one
    session per worker. Ctrl-C in a terminal reaches the supervisor only, which
    stops the workers itself; a supervisor that dies ends their line, which stops them too."""
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a CPU share of its own: see `spawn`'s docstring
        )
    finally:
        theirs.close()
    send(ours, {"config": config_to_json(config), "index": index})
    ours.setblocking(False)
    return Worker(index, proc, ours, time.monotonic())


class Supervisor:
    """Starts the workers, publishes them as one proxy, restarts one that dies, stops them all."""

    def __init__(
        self,
        config: ProxyConfig,
        count: int,
        announce: Callable[[str], None] | None = None,
        held: HeldPorts | None = None,
    ) -> None:
        self.config = config
        self.count = count
        self.held = held or HeldPorts()
        """The addresses the CLI planned and holds: released one by one as the plan holds them."""
        self.announce = announce or (lambda line: print(line, file=sys.stderr, flush=True))
        self.selector = selectors.DefaultSelector()
        self.workers: dict[int, Worker] = {}
        self.due: dict[int, float] = {}
        """Index of a dead worker -> when to start it again."""
        self.delays: dict[int, float] = {}
        """Index -> the delay of its last restart (doubled when it dies again quickly)."""
        self.stopping = False
        self.published = False
        self.plan = PortPlan((), 0)
        self.watched: tuple[Path, ...] = ()
        """The secrets and price files the workers read (the first ready worker names them)."""
        self.seen: tuple[Stamp, ...] | None = None
        """Their stamps at the last look; None before the first, which therefore nudges."""
        self.next_look = math.inf
        self.policy: LivePolicy | None = None
        """The egress policy as the workers read it: the one voice of its edits."""

    def run(self) -> None:
        """Until SIGINT/SIGTERM; an AddonError (one line) if the workers do not start."""
        private_home(self.config.home)
        self.config.confdir.mkdir(parents=True, exist_ok=True)
        ensure_ca(self.config.confdir)
        path = policy_path(self.config.policy, self.config.home)
        self.policy = LivePolicy(path, self.config.home, named=bool(self.config.policy), say=self.announce)
        self.policy.announce()
        self.plan = plan_ports(
            self.config.all_modes, self.config.listen_host, self.config.listen_port, self.held
        )
        self.held.close()  # anything the plan did not take over: the workers bind it
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        self.selector.register(wake_r, selectors.EVENT_READ, None)
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        old_fd = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        try:
            for index in range(self.count):
                self._start(index)
            self._loop(wake_r)
        finally:
            self._stop_all()
            signal.set_wakeup_fd(old_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            forget_state(self.config.home, os.getpid(), self.config.state_file)
            self.plan.close()
            wake_r.close()
            wake_w.close()

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _start(self, index: int) -> None:
        self.due.pop(index, None)
        worker = spawn(worker_config(self.config, self.plan, index), index)
        self.workers[index] = worker
        self.selector.register(worker.sock, selectors.EVENT_READ, worker)

    def _loop(self, wake: socket.socket) -> None:
        while not self.stopping:
            now = time.monotonic()
            for index in [i for i, at in self.due.items() if at <= now]:
                self._start(index)
            if now >= self.next_look:
                self._look()
            # Until the next restart or look is due, or a worker's line, its exit or a signal (the
            # wake-up socket) comes.
            due = min([*self.due.values(), self.next_look])
            timeout = max(0.0, due - now) if due < math.inf else None
            for key, _ in self.selector.select(timeout=timeout):
                if key.data is None:
                    _drain(wake)
                elif not self.stopping:
                    self._read(key.data)

    def _read(self, worker: Worker) -> None:
        try:
            data = worker.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._exited(worker)
            return
        for message in worker.lines.feed(data):
            if "error" in message and not self.published:
                raise AddonError(str(message["error"]))
            if "watch" in message and not self.watched:
                self.watched = tuple(Path(p) for p in message["watch"])
                self.next_look = time.monotonic() + INTERVAL
            if "listeners" in message:
                worker.listeners = [
                    {**x, "mode": self.plan.as_given(str(x["mode"]))} for x in message["listeners"]
                ]
                self._ready(worker)

    def _look(self) -> None:
        """Stat the workers' secrets and price files; when a stamp moved, nudge every worker to
        look too (each compares with what it last read, so a nudge too many costs two stats)."""
        self.next_look = time.monotonic() + INTERVAL
        if self.policy is not None:
            self.policy.look()
        now = tuple(stamp(path) for path in self.watched)
        if now == self.seen:
            return
        self.seen = now
        for worker in self.workers.values():
            with contextlib.suppress(OSError):  # a worker gone: its end of file is read next
                send(worker.sock, {"look": True})

    def _ready(self, worker: Worker) -> None:
        if self.published:
            self.announce(f"flightlog proxy: worker {worker.index} (pid {worker.proc.pid}) serves again")
        elif len(self.workers) == self.count and all(w.listeners is not None for w in self.workers.values()):
            listeners = self.workers[0].listeners or []
            write_state(self.config, os.getpid(), listeners, workers=self.count)
            self.announce(start_line(self.config, listeners, self.count))
            self.published = True

    def _exited(self, worker: Worker) -> None:
        """A worker's line ended: it exited. Before the start line that stops everything; after,
        it is started again (sooner if it had run a while)."""
        self.selector.unregister(worker.sock)
        worker.sock.close()
        code = worker.proc.wait()
        del self.workers[worker.index]
        if not self.published:
            raise AddonError(f"the proxy did not start: worker {worker.index} exited with code {code}")
        quick = time.monotonic() - worker.started < STEADY and worker.index in self.delays
        delay = min(RESTART_MAX, self.delays[worker.index] * 2) if quick else RESTART_DELAY
        self.delays[worker.index] = delay
        self.due[worker.index] = time.monotonic() + delay
        self.announce(
            f"flightlog proxy: worker {worker.index} (pid {worker.proc.pid}) exited with code {code}; "
            f"restarting it in {delay:g} s"
        )

    def _stop_all(self) -> None:
        """SIGTERM to every worker, then wait while each drains its writer (kill one that hangs)."""
        self.stopping = True
        for worker in self.workers.values():
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        drained: list[Drained] = []
        for worker in self.workers.values():
            try:
                worker.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
            drained += [Drained.from_json(m["stopped"]) for m in _last_lines(worker) if "stopped" in m]
            worker.sock.close()
        if drained and self.published:
            self.announce(sum(drained[1:], drained[0]).line())
        self.workers.clear()


def _last_lines(worker: Worker) -> list[dict[str, Any]]:
    """The lines an exited worker sent and nobody read yet (its `stopped` report among them)."""
    got: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        worker.sock.setblocking(False)
        while data := worker.sock.recv(65536):
            got += worker.lines.feed(data)
    return got


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except (BlockingIOError, OSError):
        pass


def supervise(
    config: ProxyConfig,
    count: int,
    announce: Callable[[str], None] | None = None,
    held: HeldPorts | None = None,
) -> None:
    """Blocking entry for the CLI: `count` workers until SIGINT/SIGTERM (`held`: the ports the CLI
    planned, kept bound until the supervisor holds them for the workers)."""
    Supervisor(config, count, announce, held).run()


def _name_process() -> None:
    """`ps` and `top` show `flightlog-worker` (cut to 15 characters), not one more python."""
    import contextlib
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(15, b"flightlog-worker", 0, 0, 0)  # PR_SET_NAME


def worker_main(fd: int) -> None:
    """A worker: its configuration from the supervisor's line, then the proxy until told to stop."""
    import asyncio

    from addons.master import serve

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # until the loop's own handlers are set
    _name_process()
    link = WorkerLink.from_fd(fd)
    try:
        given = link.receive()
        config = config_from_json(given["config"])
    except (EOFError, OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"flightlog worker: {e}")
    link.udp = given.get("index") == 0
    try:
        asyncio.run(serve(config, link=link))
    except AddonError as e:
        link.failed(str(e))
        sys.exit(1)


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
