"""The browser, driven with Textual's Pilot over a real SQLite ledger: every screen and key."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, Sparkline, Static

from storage.events import Batch, Event, StoredEvent
from storage.filters import Cursor, Filter
from storage.ledger import Ledger, open_ledger
from tests.browse.sample import NOW, T0, sqlite_sample
from tests.browse.tui_support import make_app, settle
from tui.app import PAGE, EventsScreen
from tui.counts import CountsScreen, hourly
from tui.detail import DetailScreen, OutputScreen
from tui.exchange_detail import ExchangeScreen
from tui.listing import ListScreen
from tui.source import LedgerSource, ToolInfo

__all__ = ["sqlite_sample"]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def text_of(screen: object, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())  # type: ignore[attr-defined]


def table_keys(screen: ListScreen[Any]) -> list[str]:
    table = screen.query_one("#events", DataTable)
    return [str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value) for i in range(table.row_count)]


async def test_events_newest_first(sqlite_sample: Ledger) -> None:
    """The main screen lists every event newest first and says so in its status line."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        screen = app.events_screen
        keys = table_keys(screen)
        assert keys[:3] == ["a5-response", "a5-request", "a4-response"]
        assert len(keys) == 10
        assert "10 events shown · newest first" in text_of(screen, "#status")
        assert "filter: every event" in text_of(screen, "#understood")


async def test_filter_bar_reads_plain_words(sqlite_sample: Ledger) -> None:
    """Plain words become the filter shown under the bar; a word not understood refuses the question
    naming it and keeps the filter shown; a refusal keeps it."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        screen = app.events_screen
        everything = table_keys(screen)
        await pilot.press("slash")
        await pilot.press(*"errors from agent alpha blorp")
        await pilot.press("enter")
        await settle(pilot)
        assert "did not understand 'blorp'" in text_of(screen, "#understood")
        assert table_keys(screen) == everything
        screen.query_one("#filter", Input).value = "errors from agent alpha"
        await pilot.press("enter")
        await settle(pilot)
        assert table_keys(screen) == ["a2-response"]
        assert "agent=alpha status=errors" in text_of(screen, "#understood")
        screen.query_one("#filter", Input).value = "by colour"
        await pilot.press("enter")
        await settle(pilot)
        assert "cannot count by 'colour'" in text_of(screen, "#understood")
        assert table_keys(screen) == ["a2-response"]


async def test_question_with_grouping_opens_counts(sqlite_sample: Ledger) -> None:
    """A question that counts ('cost by model') opens the counts screen on its filter."""
    app = make_app(sqlite_sample, view="events", question="cost by model yesterday")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, CountsScreen)
        assert app.screen.flt.since == NOW.replace(hour=0, minute=0) - timedelta(days=1)


async def test_pages_load_as_the_cursor_nears_the_end(tmp_path: Path) -> None:
    """Only one page is read at first; moving down reads the next one, until every event is shown."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'big.db'}", (tmp_path / "blobs").as_uri())
    total = PAGE * 2 + 50
    events = tuple(
        Event(
            event_id=f"e{i:05d}",
            action_id=f"a{i}",
            kind="http.request",
            direction="out",
            at=T0 + timedelta(seconds=i),
        )
        for i in range(total)
    )
    ledger.append(Batch("big", 1, events))
    app = make_app(ledger, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        screen = app.events_screen
        assert len(screen.items) == PAGE
        table = screen.query_one("#events", DataTable)
        for _ in range(3):
            table.move_cursor(row=len(screen.items) - 1)
            await settle(pilot)
        assert len(screen.items) == total
        assert screen.exhausted
        assert table_keys(screen)[-1] == "e00000"
        assert len(set(table_keys(screen))) == total
    ledger.close()


async def test_follows_new_events(sqlite_sample: Ledger) -> None:
    """New events appear at the top without a key press while following; `f` pauses."""
    app = make_app(sqlite_sample, view="events", follow=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        late = Event(event_id="late", action_id="a9", kind="http.request", direction="out", at=NOW)
        sqlite_sample.append(Batch("test", 3, (late,)))
        for _ in range(40):
            await pilot.pause(0.05)
            if table_keys(app.events_screen)[0] == "late":
                break
        assert table_keys(app.events_screen)[0] == "late"
        await pilot.press("f")
        assert "paused" in text_of(app.events_screen, "#status")


async def test_new_events_wait_while_the_reader_is_below_the_top(sqlite_sample: Ledger) -> None:
    """Reading further down, new events do not move the table; they appear when the cursor is back on top."""
    app = make_app(sqlite_sample, view="events", follow=0.05)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        screen = app.events_screen
        table = screen.query_one("#events", DataTable)
        table.move_cursor(row=3)
        await pilot.pause()
        later = Event(event_id="later", action_id="a10", kind="http.request", direction="out", at=NOW)
        sqlite_sample.append(Batch("test", 4, (later,)))
        for _ in range(40):
            await pilot.pause(0.05)
            if screen.pending:
                break
        assert "1 newer above" in text_of(screen, "#status")
        assert table_keys(screen)[0] == "a5-response" and table.cursor_row == 3
        table.move_cursor(row=0)
        await settle(pilot)
        assert table_keys(screen)[:2] == ["later", "a5-response"]


class SlowSource(LedgerSource):
    """A source whose first page waits for the test: proves reads run off the UI thread."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger)
        self.gate = threading.Event()
        self.reader_threads: set[str] = set()

    def page(self, flt: Filter, *, limit: int, before: Cursor | None = None) -> list[StoredEvent]:
        self.reader_threads.add(threading.current_thread().name)
        self.gate.wait(10)
        return super().page(flt, limit=limit, before=before)


async def test_reads_never_block_the_ui(sqlite_sample: Ledger) -> None:
    """While a page read is stuck, the UI still answers keys; rows arrive when the read ends."""
    source = SlowSource(sqlite_sample)
    from tui.app import BrowseApp

    app = BrowseApp(source, follow_seconds=None, now=lambda: NOW, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause(0.1)
        assert "reading…" in text_of(app.events_screen, "#status")
        await pilot.press("slash", "x")
        assert app.events_screen.query_one("#filter", Input).value == "x"
        source.gate.set()
        await settle(pilot)
        assert len(table_keys(app.events_screen)) == 10
        assert threading.main_thread().name not in source.reader_threads


async def test_detail_shows_sse_chunk_by_chunk(sqlite_sample: Ledger) -> None:
    """An SSE answer is shown one bordered chunk per event; the payload state is on screen."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 50)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(row=8)  # a1-response
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.event.event_id == "a1-response"
        chunks = [str(w.render()) for w in screen.query(".chunk")]
        assert len(chunks) == 3
        assert '"content": "Hel"' in chunks[0] and chunks[2] == "data: [DONE]"
        summary = str(screen.query(".section").first().render())
        assert "complete," in summary and "bytes text" in summary


async def test_detail_head_redacted_hex_and_mode(sqlite_sample: Ledger) -> None:
    """The head is shown exactly; redacted names are listed; binary is hex; `m` cycles text → hex."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 50)) as pilot:
        await settle(pilot)
        table = app.events_screen.query_one("#events", DataTable)
        table.move_cursor(row=1)  # a5-request: binary body
        await pilot.press("enter")
        await settle(pilot)
        body = " ".join(str(w.render()) for w in app.screen.query("#body Static"))
        assert "binary (not UTF-8)" in body and "00000000  00 01 02 03" in body
        await pilot.press("escape")
        table.move_cursor(row=9)  # a1-request: JSON body, a redacted key
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        texts = [str(w.render()) for w in screen.query(".section")]
        assert any("redacted   OPENAI_API_KEY" in t for t in texts)
        assert any("Authorization: [OPENAI_API_KEY]" in t for t in texts)
        assert '"model": "gpt-4o"' in str(screen.query("#body .section").first().render())
        await pilot.press("m")  # text
        await pilot.press("m")  # hex
        await settle(pilot)
        assert screen.mode == "hex"
        assert "00000000  7b 22" in str(screen.query("#body .section").first().render())


async def test_a_opens_the_exchange_of_an_event(sqlite_sample: Ledger) -> None:
    """`a` on an event opens its exchange: the request tab holds the request's head and body, the answer
    tab the answer's (no empty half-screen for a side with nothing)."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(row=4)  # a3-response
        await pilot.press("a")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ExchangeScreen)
        request = " ".join(str(w.render()) for w in screen.query("#pane-request Static"))
        answer = " ".join(str(w.render()) for w in screen.query("#pane-answer Static"))
        assert "POST https://api.anthropic.com/v1/messages HTTP/1.1" in request and "claude-sonnet" in request
        assert "HTTP/1.1 200" in answer and '"text": "ok"' in answer
        assert "(2 events)" in text_of(screen, "#exchange-title")


async def test_action_from_the_detail_view_opens_above_it(sqlite_sample: Ledger) -> None:
    """`a` on an event's detail asks the app (a message upward) for its action, which opens above the
    detail: escape goes back to the detail, not to the table."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(row=4)  # a3-response
        await pilot.press("enter")
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, ExchangeScreen) and app.screen.action_id == detail.event.action_id
        assert "(2 events)" in text_of(app.screen, "#exchange-title")
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is detail


async def test_counts_sparkline_and_tables(sqlite_sample: Ledger) -> None:
    """`c` shows events per hour as a sparkline and tables by model, tool and session, each group with
    a sparkline over the same hours for its events, tokens and cost."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 60)) as pilot:
        await settle(pilot)
        await pilot.press("c")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CountsScreen)
        assert list(screen.query_one("#sparkline", Sparkline).data or []) == [4.0, 2.0, 2.0, 2.0]
        models = screen.query_one("#by-model", DataTable)
        # gpt-4o: a1 at 10:05 (request + answer with usage) and a4 at 12:05 (an error, no usage)
        assert [str(c) for c in models.get_row_at(0)] == [
            "gpt-4o",
            "4",
            "█ █ ",
            "100→20",
            "█   ",
            "$0.0015",
            "█   ",
        ]
        sessions = screen.query_one("#by-session", DataTable)
        assert sessions.row_count == 3
        assert "busiest 2026-11-29T10:00Z with 4" in text_of(screen, "#hour-caption")


def test_hourly_fills_empty_hours() -> None:
    """Hours without events are zeros, so the sparkline's axis is time."""
    from storage.filters import Group

    series, caption = hourly(
        [Group("2026-11-29T10:00Z", 3, 0, 0, 0.0), Group("2026-11-29T13:00Z", 1, 0, 0, 0.0)]
    )
    assert series == [3.0, 0.0, 0.0, 1.0]
    assert "4 events" in caption
    assert hourly([]) == ([], "no events")


async def test_join_shows_directory_row_and_contracts(sqlite_sample: Ledger) -> None:
    """With a Directory connected, the detail shows the tool's row and contracts; without, it says so."""
    info = ToolInfo(
        "github.get_repo",
        {"name": "github.get_repo", "description": "Read a repository"},
        {"curl": {"method": "CLI", "command": "curl https://flightlog.local/api/dispatch"}},
    )
    app = make_app(sqlite_sample, view="events", directory=lambda name: info if name == info.name else None)
    async with app.run_test(size=(140, 60)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(row=6)  # a2-response
        await pilot.press("enter")
        await settle(pilot)
        join = str(app.screen.query_one(".join", Static).render())
        assert "description: Read a repository" in join and '"method": "CLI"' in join
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 60)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(row=6)
        await pilot.press("enter")
        await settle(pilot)
        assert "no Directory is connected" in str(app.screen.query_one(".join", Static).render())


async def test_replay_from_the_detail_view(sqlite_sample: Ledger) -> None:
    """`r` replays the event's action through the injected hook and shows what it printed."""
    asked: list[str] = []

    def replayer(action_id: str) -> str:
        asked.append(action_id)
        return "status: 200 -> 200\nbody: same"

    app = make_app(sqlite_sample, view="events", replayer=replayer)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter", "r")
        await settle(pilot)
        assert asked == ["a5"]
        assert isinstance(app.screen, OutputScreen)
        assert "status: 200 -> 200" in app.screen.text


async def test_command_palette_offers_browse_commands(sqlite_sample: Ledger) -> None:
    """The palette lists the browser's commands, and running one works."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Counts", "Follow new events", "Show errors", "Clear the filter"} <= set(titles)
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Show errors")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        assert app.filter == Filter(status="errors")
        assert set(table_keys(app.events_screen)) == {"a2-response", "a4-response"}


async def test_escape_pops_back_to_the_table(sqlite_sample: Ledger) -> None:
    """Every screen goes back to the table with escape."""
    app = make_app(sqlite_sample, view="events")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        for key in ("enter", "a", "c"):
            await pilot.press(key)
            await settle(pilot)
            assert not isinstance(app.screen, EventsScreen)
            await pilot.press("escape")
            await asyncio.sleep(0)
            assert isinstance(app.screen, EventsScreen)
