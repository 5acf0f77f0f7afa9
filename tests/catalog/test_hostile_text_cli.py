"""The Directory's and the joins' text commands, printing what someone else wrote: shown, never obeyed.

A row's summary and body reach the Directory from a folder anyone with a door may write to (an
agent steered by what it read writes rows through the HTTP and MCP doors), and the joins print
recorded URLs and errors. `find`, `manifest` and `get` printed a summary's or a body's escape
sequences as they were, so an operator reading them had the terminal's title set and, with C1
controls, lines rewritten; `uses` and `task` did the same with a recorded URL or error.
"""

from __future__ import annotations

import json
from pathlib import Path

from storage.ledger import open_ledger
from tests.catalog.conftest import cli, make_folder
from tests.storage.factory import batch, event
from tests.support.terminal import obeyable

OSC = "\x1b]0;PWNED\x07"
"""Sets the terminal's title; click strips only CSI sequences from what it prints to a pipe."""
HOSTILE_ROW = (
    "---\nname: EVIL\n"
    'description: "Reads mail\\x1b]0;PWNED\\x07 and \\u009b31mred"\n'
    "---\n# EVIL\nbody \x1b]0;PWNED\x07 here\n"
)
HOSTILE_URL = f"https://api.example.com/a{OSC}\x9b2Kfine"


def test_a_directory_row_is_shown_as_written(tmp_path: Path, home: Path) -> None:
    """find, manifest and get show a row's controls as `\\xHH`; `find --json` escapes them and reads
    back to the exact summary."""
    folder = make_folder(tmp_path / "dir", {"tool/evil.md": HOSTILE_ROW}, aliases=None)
    views = {
        "find": cli(home, "find", "--directory", str(folder), "reads", "mail"),
        "find --json": cli(home, "find", "--directory", str(folder), "--json", "reads", "mail"),
        "manifest": cli(home, "manifest", "--directory", str(folder)),
        "get": cli(home, "get", "--directory", str(folder), "evil"),
    }
    for name, out in views.items():
        assert out.returncode == 0, (name, out.stderr)
        assert not obeyable(out.stdout), (name, out.stdout)
    for name in ("find", "manifest"):
        assert "Reads mail\\x1b]0;PWNED\\x07 and \\x9b31mred" in views[name].stdout, name
    assert "body \\x1b]0;PWNED\\x07 here" in views["get"].stdout
    hit = json.loads(views["find --json"].stdout)["hits"][0]
    assert hit["summary"] == "Reads mail\x1b]0;PWNED\x07 and \x9b31mred"


def test_a_recorded_url_and_error_are_shown_as_written_by_the_joins(home: Path) -> None:
    """`task` and `uses` list the recorded events: their URL and error, shown; `--json` exact."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    ledger.append(
        batch(
            [
                event(0, url=HOSTILE_URL, task="T1", tool="weather"),
                event(1, url=HOSTILE_URL, task="T1", tool="weather", error=f"bad{OSC}\x9b8mhidden"),
            ]
        )
    )
    ledger.close()
    views = {
        "task": cli(home, "task", "T1"),
        "uses": cli(home, "uses", "weather"),
        "task --json": cli(home, "task", "T1", "--json"),
    }
    for name, out in views.items():
        assert out.returncode == 0, (name, out.stderr)
        assert not obeyable(out.stdout), (name, out.stdout)
    for name in ("task", "uses"):
        assert "/a\\x1b]0;PWNED\\x07\\x9b2Kfine" in views[name].stdout, name
        assert "bad\\x1b]0;PWNED\\x07\\x9b8mhidden" in views[name].stdout, name
    assert json.loads(views["task --json"].stdout)[0]["url"] == HOSTILE_URL


def test_an_alias_problem_is_shown_as_written(tmp_path: Path, home: Path) -> None:
    """An alias pattern naming no row is quoted by `directory check` and warned about by every
    command that opens the Directory: its controls are shown."""
    aliases = '"mail" = ["NOPE\\u001b]0;PWNED\\u0007\\u009b2K"]\n'
    folder = make_folder(tmp_path / "dir", {"tool/evil.md": HOSTILE_ROW}, aliases=aliases)
    check = cli(home, "directory", "check", "--directory", str(folder))
    found = cli(home, "find", "--directory", str(folder), "reads")
    assert check.returncode == 1 and found.returncode == 0
    for said in (check.stdout, found.stderr):
        assert 'pattern "NOPE\\x1b]0;PWNED\\x07\\x9b2K" names no row' in said, said
        assert not obeyable(said)
