"""`flightlog ledger counts|query|ask` as a user runs them: JSON out, one clear line on failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from storage.ledger import Ledger
from tests.browse.sample import sqlite_sample
from tests.support.cli_main import Run, in_process

__all__ = ["sqlite_sample"]


@pytest.fixture
def flightlog(
    sqlite_sample: Ledger, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    """Run the command line's `main()` in-process against the sample ledger (blobs beside it)."""
    monkeypatch.setenv("FLIGHTLOG_LEDGER", sqlite_sample.url)
    blobs = Path(sqlite_sample.engine.url.database or ".").parent / "blobs"
    monkeypatch.setenv("FLIGHTLOG_BLOBS", blobs.as_uri())
    return in_process(monkeypatch, capsys)


def test_counts_json_by_model(flightlog: Callable[..., Run]) -> None:
    """`ledger counts --by model --json` prints the groups the /group route answers."""
    out = flightlog("ledger", "counts", "--by", "model", "--json")
    assert out.returncode == 0, out.stderr
    groups = {g["key"]: g for g in json.loads(out.stdout)["groups"]}
    assert groups["gpt-4o"]["events"] == 4 and groups["claude-sonnet"]["tokens_in"] == 300


def test_query_words_and_options_combine(flightlog: Callable[..., Run]) -> None:
    """Plain words and filter options narrow together; the answer names the filter it used."""
    out = flightlog("ledger", "query", "errors", "--agent", "beta", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["filter"] == {"agent": "beta", "status": "errors"}
    assert [e["event_id"] for e in answer["events"]] == ["a4-response"]


def test_ask_names_unknown_words_and_counts(flightlog: Callable[..., Run]) -> None:
    """`ledger ask` reads plain words; a grouping counts; a word not understood refuses in one line."""
    out = flightlog("ledger", "ask", "cost", "by", "session", "--json")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["group_by"] == "session"
    assert {g["key"] for g in answer["groups"]} == {"s1", "s2", None}
    out = flightlog("ledger", "ask", "cost", "by", "session", "frobnicate", "--json")
    assert out.returncode == 1 and out.stderr.startswith("flightlog: did not understand 'frobnicate': ")
    assert out.stderr.count("\n") == 1


def test_failures_are_one_line(flightlog: Callable[..., Run]) -> None:
    """A refused question or a disagreeing option prints one `flightlog: ...` line and exits 1."""
    for args in (
        ("ledger", "ask", "select", "*", "from", "events"),
        ("ledger", "query", "agent", "alpha", "--agent", "beta"),
        ("ledger", "counts", "--by", "colour"),
        ("ledger", "query", "--status", "teapot"),
    ):
        out = flightlog(*args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("flightlog: "), (args, out.stderr)


def test_replay_hook_reports_failure_in_one_line(tmp_path: Path) -> None:
    """The browser's replay hook (handed over by `flightlog browse`) replays in process; a failure
    becomes one TuiError line."""
    from flightlog.commands.browse import replayer
    from storage.ledger import open_ledger
    from tui.errors import TuiError

    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    try:
        with pytest.raises(TuiError) as e:
            replayer(ledger)("no-such-action")
    finally:
        ledger.close()
    assert "\n" not in str(e.value) and "no-such-action" in str(e.value)


def test_directory_join_reads_the_row_and_its_contracts(tmp_path: Path) -> None:
    """The browser's join opens the Directory (the starter rows here) and renders the tool's contracts."""
    from flightlog.commands.browse import directory_lookup

    lookup = directory_lookup(f"sqlite:///{tmp_path / 'ledger.db'}", None)
    assert lookup is not None
    info = lookup("DIRECTORY_GET")
    assert info is not None and info.row["type"] == "tool" and info.row["description"]
    assert info.contracts["dispatch"]["url"].endswith("/api/dispatch")
    assert lookup("NO_SUCH_TOOL_ANYWHERE") is None
