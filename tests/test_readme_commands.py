"""The README's first commands, run as a newcomer would: `make run PORT=…` records, `make install` links.

The README promises two commands that work on a fresh machine; the tests run them from this checkout
(its .venv already exists, so make only checks the stamp) against a local upstream.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.upstream import upstream

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readme_starts_with_exactly_the_two_commands() -> None:
    """The first code block of README.md is `make run` and `make test`, nothing else."""
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_make_run_on_a_chosen_port_records_a_request(home: Path) -> None:
    """`make run PORT=N` listens on N, records a request through it, and drains on SIGINT."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["FLIGHTLOG_HOME"] = str(home)
    proc = subprocess.Popen(
        ["make", "-s", "run", f"PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        state = home / "proxy.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if state.exists() and any(x["port"] == port for x in json.loads(state.read_text())["listeners"]):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"make run did not listen on {port}: {proc.stdout and proc.stdout.read()!r}")
        with upstream() as up:
            answer = httpx.get(
                f"{up.base}/bytes/17?from=make-run", proxy=f"http://127.0.0.1:{port}", timeout=10
            )
        assert answer.status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    with sqlite3.connect(home / "ledger.db") as db:
        urls = [row[0] for row in db.execute("SELECT url FROM events WHERE kind = 'http.request'")]
    assert any(url.endswith("/bytes/17?from=make-run") for url in urls), urls


def test_make_install_puts_flightlog_on_path(tmp_path: Path) -> None:
    """`make install PREFIX=P` links P/bin/flightlog to this checkout's command, which runs."""
    done = subprocess.run(
        ["make", "-s", "install", f"PREFIX={tmp_path}"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    link = tmp_path / "bin" / "flightlog"
    assert link.resolve() == (ROOT / ".venv" / "bin" / "flightlog").resolve()
    assert subprocess.run([str(link), "--help"], capture_output=True, check=False).returncode == 0
