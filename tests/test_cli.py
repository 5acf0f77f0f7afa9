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


def test_one_definition_of_the_default_locations(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The command line's settings and the proxy's addons resolve FLIGHTLOG_* to the same places."""
    from flightlog.settings import load_settings
    from recording.capture_setup import default_urls

    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path))
    monkeypatch.delenv("FLIGHTLOG_LEDGER", raising=False)
    monkeypatch.delenv("FLIGHTLOG_BLOBS", raising=False)
    settings = load_settings()
    assert (settings.ledger_url, settings.blobs_url) == default_urls()
    assert settings.ledger_url == f"sqlite:///{tmp_path / 'ledger.db'}"
    monkeypatch.setenv("FLIGHTLOG_LEDGER", "postgresql+psycopg://u@h/db")
    assert load_settings().ledger_url == default_urls()[0] == "postgresql+psycopg://u@h/db"
