"""One proxy per FLIGHTLOG_HOME, said plainly (`flightlog.proxy_lock`): a second proxy is refused in
one line naming the first and leaves its `proxy.json` alone; `run` waits for a proxy still starting
instead of starting a throwaway; a taken port is named with who holds it (`flightlog.port_owner`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from flightlog import proxy_lock
from tests.capture.test_cli_capture import flightlog
from tests.support.proxy import live_proxy


def test_a_second_proxy_on_a_home_is_refused_naming_the_first(home: Path, tmp_path: Path) -> None:
    """`flightlog proxy` on a home whose proxy runs: exit 1, one line with the first's pid and
    listen address; the first's `proxy.json` is still there and `env` still names its port."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}") as first:
        second = flightlog("proxy", "--listen", "127.0.0.1:0", "--workers", "1")
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "already running" in lines[0], second.stderr
        assert f"pid {first.proc.pid}" in lines[0] and "--listen 127.0.0.1:0" in lines[0]
        assert json.loads((home / "proxy.json").read_text())["pid"] == first.proc.pid
        env = flightlog("env")
        assert f":{first.port}" in env.stdout, env.stdout
    assert proxy_lock.holder(home) is None, "the lock goes with its proxy"


def test_run_waits_for_a_proxy_that_is_starting(home: Path, tmp_path: Path) -> None:
    """A proxy that holds the home's lock and has not written `proxy.json` yet (stopped there with
    SIGSTOP): `run` waits for it and its command goes through that proxy, not through one of its own."""
    env = {**os.environ, "FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / 'ledger.db'}"}
    env = {k: v for k, v in env.items() if k.lower() not in ("http_proxy", "https_proxy")}
    proxy = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "proxy", "--listen", "127.0.0.1:0", "--workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while proxy_lock.holder(home) is None and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(proxy.pid, signal.SIGSTOP)
        assert proxy_lock.holder(home) is not None
        waiting = subprocess.Popen(
            [sys.executable, "-m", "flightlog", "run", sys.executable, "-c",
             "import os; print(os.environ['HTTP_PROXY'])"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with contextlib.suppress(subprocess.TimeoutExpired):  # a wait, not a figure: run cannot
            waiting.wait(timeout=10)  # end while the proxy it must use is stopped
        assert waiting.poll() is None, "run ended while the home's only proxy was stopped starting"
        os.killpg(proxy.pid, signal.SIGCONT)
        out, err = waiting.communicate(timeout=180)
        assert waiting.returncode == 0, err
        state = json.loads((home / "proxy.json").read_text())
        assert state["pid"] == proxy.pid
        forward = next(x for x in state["listeners"] if x["mode"].startswith("regular"))
        assert out.strip().endswith(f"127.0.0.1:{forward['port']}"), (out, forward)
    finally:
        os.killpg(proxy.pid, signal.SIGCONT)
        os.killpg(proxy.pid, signal.SIGTERM)
        proxy.wait(60)


def test_a_taken_port_names_who_holds_it(home: Path, tmp_path: Path) -> None:
    """`--listen` on a port a program holds: one line naming its pid and a way out; on a port a
    flightlog proxy of another home holds: one line naming it as a flightlog proxy and its home."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = flightlog("proxy", "--listen", f"127.0.0.1:{port}", "--no-ai-listeners", "--workers", "1")
    assert taken.returncode == 1
    (line,) = taken.stderr.strip().splitlines()
    assert f"port {port} (--listen) is taken by pid {os.getpid()}" in line and "another port" in line
    other = tmp_path / "other-home"
    with live_proxy(other, f"sqlite:///{tmp_path / 'other.db'}") as theirs:
        taken = flightlog(
            "proxy", "--listen", f"127.0.0.1:{theirs.port}", "--no-ai-listeners", "--workers", "1"
        )
    assert taken.returncode == 1
    (line,) = taken.stderr.strip().splitlines()
    assert f"taken by a flightlog proxy (pid {theirs.proc.pid}, FLIGHTLOG_HOME {other})" in line, line
