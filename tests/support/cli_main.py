"""The command line's `main()` run in process, as a user would type it: its exit code and output."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from flightlog.cli import main


@dataclass
class Run:
    """As `subprocess.CompletedProcess` names them."""

    returncode: int
    stdout: str
    stderr: str


def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """`run("ledger", "ask", ...)`: `flightlog ...` in this process (the environment as the test set it)."""

    def run(*args: str) -> Run:
        monkeypatch.setattr(sys, "argv", ["flightlog", *args])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        got = capsys.readouterr()
        return Run(code, got.out, got.err)

    return run
