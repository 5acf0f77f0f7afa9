"""The CLI's first hour (issue 43), as a newcomer meets it: the README's own `eval "$(flightlog env)"`
then `flightlog call LEDGER_COUNTS` works (the token `env` lends the shell is for its programs, while a
`run` child's token still holds); `flightlog run -- nosuchcommand` starts nothing and exits 127 in
one line; and a proxy stopped by SIGINT/SIGTERM says in one line what it drained, with one worker or
two."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.proxy import live_proxy, start_proxy
from tests.support.upstream import Upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _clean_env(home: Path, **more: str) -> dict[str, str]:
    """This environment without proxy or FLIGHTLOG_* variables, flightlog on PATH, a fresh home."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")}
    return env | {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "FLIGHTLOG_HOME": str(home), **more}


def readme_line(starts: str) -> str:
    """The README's own line beginning with `starts`, its comment cut off."""
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith(starts):
            return line.split("  #")[0].strip()
    raise AssertionError(f"README.md has no line starting {starts!r}")


def test_readme_call_after_env_is_the_operators(tmp_path: Path) -> None:
    """In one shell, the README's `eval "$(flightlog env)"` then its `flightlog call LEDGER_COUNTS
    --args '{}'` answers (before: refused by `grants`, the shell's agent token taken for the
    operator's); a child of `flightlog run` in that shell is still held to the token it is lent."""
    home, url = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
    env_line, call_line = readme_line('eval "$(flightlog env)"'), readme_line("flightlog call LEDGER_COUNTS")
    assert call_line == "flightlog call LEDGER_COUNTS --args '{}'"
    script = f'{env_line}\ntest -n "$FLIGHTLOG_TOKEN" || exit 9\n{call_line}\n'
    child = f"{env_line}\nflightlog run -- {call_line}\n"
    with live_proxy(home, url):
        env = _clean_env(home, FLIGHTLOG_LEDGER=url, FLIGHTLOG_BLOBS=(home / "blobs").as_uri())
        done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=90)
        held = subprocess.run(["bash", "-c", child], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert held.returncode == 1 and json.loads(held.stdout)["refused"]["limit"] == "grants", held.stderr


@pytest.mark.parametrize("command", ["nosuchcommand-43", "./no/such/path"])
def test_run_refuses_a_command_that_does_not_resolve_before_starting_anything(
    tmp_path: Path, command: str
) -> None:
    """`flightlog run -- CMD` with CMD neither on PATH nor an executable path: one line, exit 127,
    and nothing started or made (no proxy, no FLIGHTLOG_HOME)."""
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "run", "--", command, "--flag"],
        env=_clean_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        127,
        "",
        f"flightlog: command not found: {command}\n",
    )
    assert not home.exists()


STOPPED = re.compile(
    r"^flightlog proxy: stopped; drained (\d+) exchanges in flight( \(\d+ cut, recorded partial\))?; "
    r"(\d+) events written this run; (.+)$",
    re.M,
)


@pytest.mark.parametrize(("workers", "sig"), [("1", signal.SIGINT), ("2", signal.SIGTERM)])
def test_a_stopped_proxy_says_what_it_drained(
    tmp_path: Path, http_upstream: Upstream, workers: str, sig: signal.Signals
) -> None:
    """Three exchanges answered, a fourth streaming when the signal comes: the proxy's last line says
    it drained 1 exchange in flight, wrote 8 events this run (2 an exchange) and lost nothing; with
    two workers the supervisor says the sum, once."""
    proxy = start_proxy(tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}", args=["--workers", workers])
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as client:
        for _ in range(3):
            assert client.get(f"{http_upstream.base}/fixed").status_code == 200
        streamed: list[int] = []
        slow = threading.Thread(
            target=lambda: streamed.append(len(client.get(f"{http_upstream.base}/sse/40").content))
        )
        slow.start()
        time.sleep(0.4)  # the stream (40 events, 0.03 s apart) is under way
        proxy.proc.send_signal(sig)
        slow.join(30)
    proxy.proc.wait(60)
    log = proxy.log()
    said = STOPPED.findall(log)
    assert len(said) == 1, log[-2000:]
    ((in_flight, cut, written, lost),) = said
    assert (in_flight, cut, written, lost) == ("1", "", "8", "nothing lost"), log[-2000:]
    assert streamed and streamed[0] > 0
    assert log.rstrip().splitlines()[-1].startswith("flightlog proxy: stopped; ")
