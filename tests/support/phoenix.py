"""A real OTLP receiver for tests: Arize Phoenix, in a virtual environment of its own.

Phoenix (825 MB with its dependencies) is kept out of flightlog's environment: the first use builds
its environment in the cache (`$XDG_CACHE_HOME/flightlog/phoenix-20`: the suite points XDG_CACHE_HOME at
the checkout's `.test-cache/`, which `make clean` removes; or FLIGHTLOG_PHOENIX_VENV, to share one
between checkouts); later uses start it at once. Parallel test
workers build it once between them (a file lock; a build cut short is redone). The server listens
on loopback ports of its own with its data in a temporary folder and its telemetry off, and is
stopped when the block ends.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REQUIREMENT = "arize-phoenix>=20,<21"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flightlog"
VENV = Path(os.environ.get("FLIGHTLOG_PHOENIX_VENV") or CACHE / "phoenix-20")
BUILT = VENV / ".flightlog-built"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def phoenix_command() -> Path:
    """`phoenix` from its own environment, built on first use."""
    command = VENV / "bin" / "phoenix"
    if BUILT.exists():
        return command
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with (VENV.parent / f"{VENV.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building it: wait for that one
        if not BUILT.exists():
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run(
                [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", REQUIREMENT],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            BUILT.touch()
    return command


@contextmanager
def phoenix(workdir: Path, timeout: float = 120.0) -> Iterator[str]:
    """A running Phoenix; yields its base URL (OTLP/HTTP at `/v1/traces`, REST at `/v1/...`)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(
        PHOENIX_WORKING_DIR=str(workdir),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(_free_port()),
        PHOENIX_TELEMETRY_ENABLED="false",
    )
    log = workdir / "phoenix.log"
    workdir.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(phoenix_command()), "serve"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"phoenix did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
