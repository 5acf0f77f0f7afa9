"""Plain words read the same at every door that takes them: against the Ledger's own values.

`ledger ask` reads "calls to anthropic" as host api.anthropic.com because the Ledger holds that host
(`storage.questions.known_values`). The other doors that take words (`ledger query`, `counts`, `tally`,
`reprice`, `export`, `run --replay`'s selection and the browser's filter bar) read them the same way,
through the one reader (`storage.questions.reading` with the Ledger's `Known`); before, they read without the
Ledger's values and refused "anthropic" as a word they did not understand. A word the Ledger does not
hold is still refused, naming it, at every door.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.ledger import Ledger, open_ledger
from tests.browse.sample import fill
from tests.browse.tui_support import make_app, settle

WORDS = ["calls", "to", "anthropic"]
HOST = "api.anthropic.com"


@pytest.fixture
def sample(tmp_path: Path) -> Iterator[tuple[Ledger, Path]]:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    fill(ledger)
    yield ledger, tmp_path
    ledger.close()


def _flightlog(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLIGHTLOG_HOME": str(folder / "home")}
    for name in ("FLIGHTLOG_LEDGER", "FLIGHTLOG_BLOBS", "FLIGHTLOG_DIRECTORY"):
        env.pop(name, None)
    where = ["--ledger", f"sqlite:///{folder / 'ledger.db'}"]
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args, *where],
        capture_output=True,
        text=True,
        errors="surrogateescape",  # a recorded non-UTF-8 byte is printed as the byte it was
        env=env,
        timeout=60,
    )


def _filter_host(out: str) -> list[str]:
    return [json.loads(out)["filter"].get("host")]


def _lines_hosts(out: str) -> list[str]:
    return sorted({json.loads(line)["host"] for line in out.splitlines() if line.strip()})


DOORS: dict[str, tuple[list[str], list[str], Callable[[str], list[str]]]] = {
    # door: (arguments before the words, after them, what the answer says it selected)
    "query": (["ledger", "query"], ["--json"], _filter_host),
    "counts": (["ledger", "counts"], ["--json"], _filter_host),
    "counts --by": (["ledger", "counts"], ["--by", "host", "--json"], _filter_host),
    "counts --by twice": (["ledger", "counts"], ["--by", "host", "--by", "agent", "--json"], _filter_host),
    "tally": (["ledger", "tally"], ["--by", "host", "--json"], _filter_host),
    "reprice": (["ledger", "reprice"], ["--json"], _filter_host),
    "ask": (
        ["ledger", "ask"],
        ["--json"],
        lambda out: sorted({e["host"] for e in json.loads(out)["events"]}),
    ),
    "export": (["export", "--format", "jsonl"], [], _lines_hosts),
}


@pytest.mark.parametrize("door", DOORS)
def test_every_door_reads_words_against_the_ledgers_values(sample: tuple[Ledger, Path], door: str) -> None:
    """A bare word the Ledger holds as a host's label selects that host at every door."""
    _, folder = sample
    before, after, selected = DOORS[door]
    extra = ["--blobs", (folder / "blobs").as_uri()] if before[0] == "export" else []
    done = _flightlog(folder, *before, *WORDS, *after, *extra)
    assert done.returncode == 0, done.stderr
    assert selected(done.stdout) == [HOST], done.stdout[:500]


@pytest.mark.parametrize("word", ["nowhere", "\udcffzz"], ids=["unknown", "a non-UTF-8 byte"])
@pytest.mark.parametrize("door", DOORS)
def test_a_word_the_ledger_does_not_hold_is_refused_at_every_door(
    sample: tuple[Ledger, Path], door: str, word: str
) -> None:
    """Not a value the Ledger holds, not a word the reader knows: one line naming it, exit 1; a byte
    that is not UTF-8 (argv keeps it as a lone surrogate, which no database takes) included."""
    _, folder = sample
    before, after, _ = DOORS[door]
    extra = ["--blobs", (folder / "blobs").as_uri()] if before[0] == "export" else []
    done = _flightlog(folder, *before, "calls", "to", word, *after, *extra)
    assert done.returncode == 1 and "did not understand '" in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr


def test_a_value_recorded_with_a_non_utf8_byte_is_found_by_the_same_byte(tmp_path: Path) -> None:
    """An agent name with a non-UTF-8 byte is stored in the escaped form (`storage.escaped`); asked
    for with that byte, as an option or in words, the Ledger finds it (it used to fail with a
    traceback: the byte reached the database driver as is)."""
    from storage.escaped import escape_event
    from tests.storage.factory import batch, event

    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(batch([escape_event(event(0, agent="b\udcffd")), event(1, agent="plain")]))
    ledger.close()
    for args in (["--agent", "b\udcffd"], ["agent", "b\udcffd"]):
        done = _flightlog(tmp_path, "ledger", "query", *args, "--json")
        assert done.returncode == 0, done.stderr
        assert [e["event_id"] for e in json.loads(done.stdout)["events"]] == ["ev-000000"], done.stdout


def test_run_replays_selection_reads_the_ledgers_values(sample: tuple[Ledger, Path]) -> None:
    """`run --replay "calls to anthropic"` selects the recording the same way."""
    from flightlog.commands.replay_options import replay_selection

    _, folder = sample
    selection = replay_selection(" ".join(WORDS), f"sqlite:///{folder / 'ledger.db'}")
    assert selection.filter.host == HOST


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_the_browsers_filter_bar_reads_the_ledgers_values(sample: tuple[Ledger, Path]) -> None:
    """Typed into the browser's filter bar, the same words show only that host's exchange."""
    from textual.widgets import Input, Static

    ledger, _ = sample
    app = make_app(ledger, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        screen = app.events_screen
        screen.query_one("#filter", Input).value = " ".join(WORDS)
        await pilot.press("slash", "enter")
        await settle(pilot)
        understood: Any = screen.query_one("#understood", Static).render()
        assert f"host={HOST}" in str(understood), str(understood)
        assert {e.host for e in screen.items} == {HOST}, [e.host for e in screen.items]
