"""No markup is ever shown raw: every screen and notice of the browser, read as the user sees it.

Each screen is exported as Textual draws it (`export_screenshot`, the terminal's cells as SVG text),
so a text meant as markup but shown as written (`Press [b]q[/b] to quit`) is caught wherever it comes
from: a widget, a border title, a footer, a notice of ours or one of Textual's own.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets._toast import Toast

from storage.ledger import Ledger
from tests.browse.sample import sqlite_sample
from tests.browse.tui_support import make_app, settle
from tui.app import textual_markup

__all__ = ["sqlite_sample"]
pytestmark = pytest.mark.anyio
MARKUP = re.compile(
    r"\[/?(?:b|i|u|s|bold|italic|underline|dim|reverse|strike|link|red|green|yellow|blue|cyan|magenta"
    r"|white|black|\$[\w-]+|@[\w.]+)(?:[ =][^\]]*)?\]|\[/\]"
)
"""A markup tag (Rich's or Textual's); `[NAME]`, a redacted secret's name, is not one."""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def seen(pilot: Pilot[None]) -> str:
    """The screen's text as drawn, cell by cell (with the notices on top of it)."""
    svg = pilot.app.export_screenshot()
    cells = "".join(html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S))
    toasts = [str(t.render()) for t in pilot.app.screen.query(Toast)]  # drawn on a layer of their own
    return "\n".join([cells.replace("\xa0", " "), *toasts])


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("Press [b]ctrl+q[/b] to quit the app", "Press ctrl+q to quit the app"),
        ("Saved screenshot to [$text-success]'/tmp/a.svg'", "Saved screenshot to '/tmp/a.svg'"),
        ("a [/x] that is not markup", "a [/x] that is not markup"),
    ],
)
def test_textual_markup_is_read_as_its_text(written: str, meant: str) -> None:
    """A notice Textual wrote in markup becomes the text it means; broken markup stays as written."""
    assert textual_markup(written) == meant


async def test_no_screen_or_notice_shows_markup(sqlite_sample: Ledger, tmp_path: Path) -> None:
    """Every screen the keys reach (both lists, an exchange's tabs, counts, help, the export chooser),
    our notices and Textual's own (the quit hint, a saved screenshot) show no markup tag."""
    app = make_app(sqlite_sample)
    screens: dict[str, str] = {}
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        await settle(pilot)

        async def look(name: str, *keys: str) -> None:
            await pilot.press(*keys)
            await settle(pilot)
            screens[name] = seen(pilot)

        await look("exchanges")
        await look("events", "v")
        await look("exchanges again", "v")
        await look("exchange: request", "down", "down", "down", "enter")
        for n in range(2, 8):
            await look(f"exchange: tab {n}", str(n))
        await look("exchange: bodies as text (a notice)", "m")
        await look("export chooser", "e")
        await look("back", "escape", "escape")
        await look("help", "question_mark")
        await look("counts", "escape", "c")
        await look("no asks folder (a notice)", "escape", "A")
        app.action_help_quit()
        await look("Textual's quit hint")
        app.post_message(events.DeliveryComplete(key="k", path=tmp_path / "shot.svg", name="screenshot"))
        await look("Textual's screenshot notice")
    shown_raw = {name: MARKUP.findall(text) for name, text in screens.items() if MARKUP.search(text)}
    assert shown_raw == {}
    assert "to quit the app" in screens["Textual's quit hint"]
    assert "Saved screenshot to" in screens["Textual's screenshot notice"]
    assert "api.openai.com" in screens["exchanges"]
