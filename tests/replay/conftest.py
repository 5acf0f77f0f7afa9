"""Running the agent script under `flightlog run` (recording) and `flightlog run --replay`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENT = Path(__file__).with_name("agent.py")


@dataclass
class Ran:
    code: int
    out: str
    err: str
    report: dict[str, Any] | None


def flightlog(home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Ran:
    """`python -m flightlog ARGS` with FLIGHTLOG_HOME=home and no proxy variables inherited."""
    base = {
        k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    base.update(FLIGHTLOG_HOME=str(home), **(env or {}))
    report = home.parent / "report.json"
    report.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", *args],
        env=base,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    data = json.loads(report.read_text()) if report.exists() else None
    return Ran(done.returncode, done.stdout, done.stderr, data)


def agent(*prompt: str) -> list[str]:
    return ["--", sys.executable, str(AGENT), *prompt]
