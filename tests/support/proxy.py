"""A live flightlog proxy for tests: `flightlog proxy` in a subprocess on free ports.

    with live_proxy(home, ledger_url) as proxy:
        httpx.get(url, proxy=proxy.url)
    # leaving the block sends SIGTERM and waits: the queue is drained into the Ledger

Other areas use it to put real traffic through the real proxy. `proxy.client_env()` gives the
variables `flightlog run` would set (proxy URL with identity, CA bundle variables).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from addons.proxy_env import Listener, proxy_env
from recording.identity import EMPTY, Identity
from tests.support.processes import stop_group


@dataclass
class LiveProxy:
    """A running proxy subprocess and where to reach it."""

    proc: subprocess.Popen[bytes]
    home: Path
    ledger_url: str
    blobs_url: str
    listeners: tuple[Listener, ...]
    log_path: Path
    stopped: bool = field(default=False)

    @property
    def port(self) -> int:
        return next(x.port for x in self.listeners if x.mode.startswith("regular"))

    @property
    def url(self) -> str:
        """The forward proxy URL (no credentials)."""
        return f"http://127.0.0.1:{self.port}"

    def reverse_port(self, target: str) -> int:
        """The port of the reverse listener whose spec contains `target` (a test's own `--mode`
        before the model APIs' default listeners, which match only by their API name or host)."""
        reverse = [x for x in self.listeners if x.mode.startswith("reverse")]
        own = [x for x in reverse if not x.api]
        return next(x.port for x in [*own, *reverse] if target in x.mode or target == x.api)

    def ai_port(self, api: str) -> int:
        """The port of the model API listener for `api` (openai, anthropic), as proxy.json tags it."""
        return next(x.port for x in self.listeners if x.api == api)

    @property
    def ca(self) -> Path:
        """mitmproxy's CA certificate (PEM) under this proxy's FLIGHTLOG_HOME."""
        return self.home / "mitmproxy" / "mitmproxy-ca-cert.pem"

    def client_env(self, identity: Identity = EMPTY) -> dict[str, str]:
        """What `flightlog run` sets for a child: proxy variables with identity, CA variables."""
        return proxy_env(("127.0.0.1", self.port), self.ca, identity)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 60.0) -> str:
        """SIGTERM and wait until the proxy drained its queue and exited; returns its log. Whatever of
        its process group is left then (a writer or worker it did not end) is killed: nothing outlives
        the test."""
        if not self.stopped:
            self.stopped = True
            try:
                if self.proc.poll() is None:
                    self.proc.send_signal(signal.SIGTERM)
                    try:
                        self.proc.wait(timeout=timeout)
                    except subprocess.TimeoutExpired:
                        raise AssertionError(
                            f"proxy did not stop within {timeout} s:\n{self.log()}"
                        ) from None
            finally:
                stop_group(self.proc, grace=0)
        return self.log()


def start_proxy(
    home: Path,
    ledger_url: str,
    *,
    blobs_url: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    launcher: Sequence[str] = (),
    default_workers: bool = False,
) -> LiveProxy:
    """Start `flightlog proxy --listen 127.0.0.1:0` and wait until it listens: one worker unless
    `args` say `--workers N` (the writer is then the proxy's own child, and start-up is cheapest)
    or `default_workers` leaves the count to the proxy. `launcher` runs it (`taskset -c 0`)."""
    home.mkdir(parents=True, exist_ok=True)
    _seed_ca(home)
    blobs = blobs_url or (home / "blobs").as_uri()
    child_env = {
        k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    child_env.update({"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs})
    child_env.update(env or {})
    workers = () if "--workers" in args or default_workers else ("--workers", "1")
    log_path = home / f"proxy-{time.monotonic_ns()}.log"
    state_path = home / "proxy.json"
    state_path.unlink(missing_ok=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                *launcher,
                sys.executable,
                "-m",
                "flightlog",
                "proxy",
                "--listen",
                "127.0.0.1:0",
                *workers,
                *args,
            ],
            env=child_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: `stop` ends its writer and workers too
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"proxy exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
            continue
        if state.get("pid") == proc.pid:
            listeners = tuple(
                Listener(x["mode"], x["host"], int(x["port"]), x.get("api", "")) for x in state["listeners"]
            )
            _keep_ca(home)
            return LiveProxy(proc, home, ledger_url, blobs, listeners, log_path)
        time.sleep(0.05)
    stop_group(proc, grace=0)
    raise AssertionError(f"proxy did not listen within {timeout} s:\n{log_path.read_text()}")


_CA_CACHE: Path | None = None


def _seed_ca(home: Path) -> None:
    """Reuse one generated CA for every proxy of a test run (generating one costs ~1 s)."""
    confdir = home / "mitmproxy"
    if _CA_CACHE is not None and not confdir.exists():
        shutil.copytree(_CA_CACHE, confdir)


def _keep_ca(home: Path) -> None:
    global _CA_CACHE
    if _CA_CACHE is None and (home / "mitmproxy" / "mitmproxy-ca.pem").exists():
        cache = Path(tempfile.mkdtemp(prefix="flightlog-test-ca-"))
        shutil.copytree(home / "mitmproxy", cache / "mitmproxy")
        _CA_CACHE = cache / "mitmproxy"


@contextmanager
def live_proxy(home: Path, ledger_url: str, **kwargs: object) -> Iterator[LiveProxy]:
    """`start_proxy` as a context manager that always stops (and drains) the proxy."""
    proxy = start_proxy(home, ledger_url, **kwargs)  # type: ignore[arg-type]
    try:
        yield proxy
    finally:
        proxy.stop()
