"""Run a pip install and keep saying how far it got while pip itself is silent.

pip shows a line per package it collects, then unpacks them all without a word: on a loaded 2-core
machine `make run`'s install sat silent for most of a minute after "Installing collected packages",
which reads as a hang. This runs the command, passes its output through as it comes, and after every
`QUIET` seconds without a line prints how many packages the environment holds so far (each package
pip finishes adds its `.dist-info` folder), so progress shows throughout.

Usage: python scripts/pip_progress.py VENV -- COMMAND...   (exits with the command's status)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

QUIET = float(os.environ.get("FLIGHTLOG_PIP_QUIET", "10"))
"""Seconds of silence from pip before a progress line."""


def installed(venv: Path) -> int:
    """Packages in the environment's site-packages (their `.dist-info` folders)."""
    return sum(1 for _ in venv.glob("lib/python3*/site-packages/*.dist-info"))


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python scripts/pip_progress.py VENV -- COMMAND...", file=sys.stderr)
        return 2
    venv, command = Path(argv[0]), argv[2:]
    last = [time.monotonic()]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None

    def tick() -> None:
        while proc.poll() is None:
            time.sleep(min(1.0, QUIET))
            if time.monotonic() - last[0] >= QUIET and proc.poll() is None:
                print(
                    f"flightlog: pip is still installing: {installed(venv)} packages in .venv so far",
                    flush=True,
                )
                last[0] = time.monotonic()

    threading.Thread(target=tick, daemon=True).start()
    for line in iter(proc.stdout.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        last[0] = time.monotonic()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
