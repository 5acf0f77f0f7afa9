"""`make run`'s install says how far it got while pip unpacks in silence (scripts/pip_progress.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_silent_install_gets_progress_lines_and_keeps_its_exit_status(tmp_path: Path) -> None:
    """A command that prints one line, then stays silent until a progress line has been shown (it waits
    for the test's signal, a file, sent once the line came): its own lines pass through in order, the
    progress line counts the environment's packages, and its exit status is the script's."""
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.12" / "site-packages" / "one-1.0.dist-info").mkdir(parents=True)
    go = tmp_path / "go"
    script = f'echo collecting; while [ ! -e "{go}" ]; do sleep 0.05; done; echo done; exit 3'
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "pip_progress.py"), str(venv), "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "FLIGHTLOG_PIP_QUIET": "0.2"},
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip() for _ in range(2)]
    go.touch()
    lines += [line.strip() for line in proc.stdout]
    assert proc.wait(60) == 3
    assert lines[0] == "collecting" and lines[-1] == "done", lines
    assert lines[1] == "flightlog: pip is still installing: 1 packages in .venv so far", lines
