"""Recorded text in the browser: anyone may have written it, so it is shown, never obeyed.

A URL an agent was made to request and an agent name from a header reached the browser's tables as
plain strings, which Textual's DataTable reads as Rich markup: `[/x]` in a path stopped the browser
with a MarkupError (one odd request, and the reviewer's view of the Ledger was gone), `[b]` or
`[link=...]` styled or linked what the reviewer read, and escape sequences went to the terminal.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static, TextArea

from storage.ledger import open_ledger
from tests.browse.sample import NOW
from tests.browse.tui_support import make_app, settle
from tests.storage.factory import batch, event
from tui.counts import CountsScreen
from tui.exchange_detail import ExchangeScreen

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

URL = "https://api.example.com/[/x]/a\x1b]0;PWNED\x07[b]bold"
MODEL = "m[/y]\x1b[2J"
HEAD = b"POST /a\x1b]0;PWNED\x07 HTTP/1.1\r\nHost: api.example.com\r\nX-Agent: \x9b31mred"
BODY = b"plain \x1b[2Jtext\nline two"
AGENT = "[link=https://evil.example]a[/link]\x1b[2J"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def hostile(tmp_path: Path) -> Any:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    at = NOW - timedelta(minutes=5)
    hostile = {"url": URL, "agent": AGENT, "model": MODEL, "session": MODEL, "head": HEAD}
    ledger.append(batch([event(i, BODY, at=at, **hostile) for i in (0, 1)]))
    yield ledger
    ledger.close()


def cells(screen: Any) -> list[str]:
    out = []
    for table in screen.query(DataTable):
        for i in range(table.row_count):
            out += [table._get_row_renderables(i).cells[j].plain for j in range(len(table.columns))]
    return out


@pytest.mark.parametrize("view", ["exchanges", "events"])
async def test_a_hostile_url_and_agent_are_shown_as_written(hostile: Any, view: str) -> None:
    """The list draws, the markup is shown as the brackets it is, and no control character is."""
    app = make_app(hostile, view=view)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        shown = "\n".join(cells(app.screen))
    assert app.return_code is None  # still running: no MarkupError
    assert "[/x]" in shown and "[b]bold" in shown and "[link=https://evil." in shown  # (a narrow column)
    assert "\\x1b]0;PWNED\\x07" in shown and "m[/y]\\x1b[2J" in shown
    assert not [c for c in shown if c not in "\n" and (c < " " or "\x7f" <= c <= "\x9f")]


async def test_a_hostile_model_is_shown_as_written_in_the_counts(hostile: Any) -> None:
    """The counts screen's tables (by model, tool and session) show the group's name as written."""
    app = make_app(hostile, view="events", question="events by model")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, CountsScreen)
        shown = "\n".join(cells(app.screen))
    assert shown.count("m[/y]\\x1b[2J") == 2  # by model, by session
    assert "\x1b" not in shown


async def test_an_exchanges_title_head_and_body_are_shown_as_written(hostile: Any) -> None:
    """The exchange's title (its URL), its exact head and its body: escapes shown, lines kept."""
    app = make_app(hostile)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ExchangeScreen)
        shown = ""
        for tab in "12":  # the request, the answer
            await pilot.press(tab)
            await settle(pilot)
            shown += "\n".join(str(w.render()) + str(w.border_title or "") for w in app.screen.query(Static))
    assert "/a\\x1b]0;PWNED\\x07[b]bold" in shown  # the title
    assert "X-Agent: \\x9b31mred" in shown and "plain \\x1b[2Jtext\nline two" in shown
    assert not [c for c in shown if c not in "\n\t" and (c < " " or "\x7f" <= c <= "\x9f")]


async def test_a_large_body_is_shown_as_written_too(tmp_path: Path) -> None:
    """A body over 32 KiB is drawn in a scrolling TextArea rather than a section: the same showing."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    large = b"\x1b]0;PWNED\x07 line\n" * 3000
    ledger.append(batch([event(i, large, at=NOW - timedelta(minutes=5)) for i in (0, 1)]))
    app = make_app(ledger)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            await pilot.press("1")
            await settle(pilot)
            areas = [a.text for a in app.screen.query(TextArea)]
    finally:
        ledger.close()
    assert areas and all(a.startswith("\\x1b]0;PWNED\\x07 line\n") and "\x1b" not in a for a in areas)
