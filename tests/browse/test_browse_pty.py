"""`flightlog browse` in a real terminal (a pty): what a user's first keys do."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.browse.web_support import sample_home


def read_until(fd: int, wanted: bytes, seconds: float) -> bytes:
    """What the terminal shows until `wanted` appears (or the time is up)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
    return seen


def test_ctrl_c_quits(tmp_path: Path) -> None:
    """The README says the browser runs "until Ctrl-C": Ctrl-C in the terminal ends it, with 0."""
    env = {**sample_home(tmp_path), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
    env.pop("TEXTUAL_DRIVER", None)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "browse", "--follow", "0"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
        start_new_session=True,
    )
    os.close(terminal)
    try:
        shown = read_until(controller, b"exchanges shown", 60)
        assert b"exchanges shown" in shown, shown[-2000:]
        os.write(controller, b"\x03")
        deadline = time.monotonic() + 5
        while proc.poll() is None and time.monotonic() < deadline:
            read_until(controller, b"\x00never", 0.2)  # keep the terminal drained while it closes
        assert proc.poll() == 0, "Ctrl-C did not end the browser"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
