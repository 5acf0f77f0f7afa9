"""A `flightlog proxy` in a child process: started on free ports, waited for, stopped with a drain.

`flightlog run` starts one when none is running, and `run --replay --record-missing` one of its own
for the misses; both wait for the child's `proxy.json` (written once its writer reads) and stop it
with SIGTERM, so it drains what it queued into the Ledger.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from addons.ai_listeners import AI_APIS
from addons.proxy_env import STATE_FILE, ProxyState, read_state
from flightlog import proxy_lock
from flightlog.errors import CommandError

PROVIDER_MODES: Final = tuple(f"reverse:{api.url}@0" for api in AI_APIS)
"""Reverse listeners for the model APIs in a serve-back (`flightlog.replay_run`, in-process: any
free port); a recording proxy opens its own (`addons.ai_listeners`)."""


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without proxy variables (the proxy must not proxy itself), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    return env | dict(extra or {})


def spawn(
    env: Mapping[str, str], log: IO[bytes] | None = None, options: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`flightlog proxy` on free ports (the model APIs' reverse listeners included, unless `options`
    say `--no-ai-listeners`), with `options` (the proxy options `flightlog run` was given). One worker:
    it carries one command's traffic, and one process starts soonest (a shared `flightlog proxy`
    started by hand uses every core)."""
    args = [sys.executable, "-m", "flightlog", "proxy", "--workers", "1", "--listen", "127.0.0.1:0", *options]
    out = log if log is not None else subprocess.DEVNULL
    return subprocess.Popen(args, env=dict(env), stdout=out, stderr=subprocess.STDOUT if log else None)


def wait_for_state(
    home: Path,
    proc: subprocess.Popen[bytes],
    timeout: float = 30.0,
    log: Path | None = None,
    name: str = STATE_FILE,
) -> ProxyState:
    """The child's published state once it listens; one clear error (its last log line) if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log else []
            said = f": {tail[0]}" if tail else " before listening"
            raise CommandError(f"the proxy exited with code {proc.returncode}{said}")
        state = read_state(home, name)
        if state is not None and state.pid == proc.pid:
            return state
        time.sleep(0.05)
    stop(proc)
    raise CommandError(f"the proxy did not start listening within {timeout:g} s")


STARTING_WAIT: Final = 120.0
"""How long `run` waits for a proxy that holds the home's lock and does not listen yet."""


def running_or_starting(home: Path, timeout: float = STARTING_WAIT) -> ProxyState | None:
    """The home's proxy: the one running, else the one starting (it holds `proxy.lock` and has not
    written `proxy.json` yet: waited for, up to `timeout`), else None (none, or it died starting)."""
    state = read_state(home)
    if state is not None:
        return state
    deadline = time.monotonic() + timeout
    while (found := proxy_lock.holder(home)) is not None:
        state = read_state(home)
        if state is not None and state.pid == found.pid:
            return state
        if time.monotonic() > deadline:
            raise CommandError(
                f"the proxy for {home} (pid {found.pid}) holds its lock and did not listen within "
                f"{timeout:g} s: wait for it or stop it"
            )
        time.sleep(0.05)
    return read_state(home)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the proxy drains its queue into the Ledger), then wait; kill only if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
