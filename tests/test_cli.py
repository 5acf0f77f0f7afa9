"""The command line lists the whole interface of DESIGN.md and fails in one line."""

from __future__ import annotations

import subprocess
import sys

DESIGN_COMMANDS = [
    "proxy",
    "run",
    "env",
    "ledger",
    "find",
    "get",
    "manifest",
    "contracts",
    "mcp",
    "call",
    "token",
    "directory",
    "browse",
    "replay",
    "serve-replay",
    "export",
]


def flightlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_every_design_command() -> None:
    out = flightlog("--help")
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("  ")}
    missing = [c for c in DESIGN_COMMANDS if c not in listed]
    assert not missing, f"--help does not list {missing}"


def test_ledger_group_lists_its_commands() -> None:
    out = flightlog("ledger", "--help")
    for sub in ("row", "action", "blob", "counts", "query", "verify"):
        assert f"  {sub} " in out.stdout or f"  {sub}\n" in out.stdout, sub
