"""`make run` as the README gives it: options after ARGS= go to `flightlog proxy`, the port after PORT=.

`make -n` prints the commands without running them (nor installing anything): the proxy's command line
is the last one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("given", "tail"),
    [
        ((), "flightlog proxy --listen 127.0.0.1:8080"),
        (("PORT=9090",), "flightlog proxy --listen 127.0.0.1:9090"),
        (
            ("ARGS=--upstream-ca corp.pem --workers 2",),
            "flightlog proxy --listen 127.0.0.1:8080 --upstream-ca corp.pem --workers 2",
        ),
    ],
    ids=["defaults", "port", "args"],
)
def test_make_run_passes_the_port_and_options_on(given: tuple[str, ...], tail: str) -> None:
    """The last command `make run` would run is the proxy, with PORT and ARGS as given."""
    make = shutil.which("make")
    assert make is not None, "make is needed (the README's first command)"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # as typed
    done = subprocess.run(
        [make, "-n", "--no-print-directory", "run", *given],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.endswith(tail) and last.split()[0].endswith(".venv/bin/flightlog"), last
