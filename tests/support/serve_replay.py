"""`flightlog serve-replay` as a user starts it: a process, its listening line, its JSON report at SIGINT."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServeReplay:
    """A running `serve-replay --json`: its proxy URL and first stderr line; `report` once it ended."""

    proxy_url: str
    line: str
    report: dict[str, Any] = field(default_factory=dict)


@contextmanager
def serve_replay(ledger_url: str, blobs_url: str, *args: str) -> Iterator[ServeReplay]:
    """Start `flightlog serve-replay --listen 127.0.0.1:0 ARGS --json` on the given Ledger; at the
    block's end stop it with SIGINT, assert it exited 0 and read its report."""
    env = {**os.environ, "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs_url}
    command = [sys.executable, "-m", "flightlog", "serve-replay", "--listen", "127.0.0.1:0", *args, "--json"]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        assert found, line
        running = ServeReplay(f"http://127.0.0.1:{found.group(1)}", line)
        yield running
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    running.report = json.loads(stdout)
