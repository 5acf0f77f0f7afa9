"""The exchange list and the exchange's tabs, driven with Pilot over a real SQLite ledger: every key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static, TabbedContent

from storage.events import Batch, Event
from storage.ledger import Ledger
from tests.browse.conversations import T1, conversation_ledger
from tests.browse.sample import sqlite_sample
from tests.browse.tui_support import make_app, settle
from tui.app import BrowseApp, EventsScreen, ExchangesScreen
from tui.dialogs import ExportScreen, HelpScreen, OutputScreen
from tui.exchange_detail import ExchangeScreen
from tui.source import ToolInfo

__all__ = ["conversation_ledger", "sqlite_sample"]
pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: run first on the xdist workers
ROW = {"c8": 0, "c7": 1, "c6": 2, "c5": 3, "c4": 4, "c3": 5, "c2": 6, "c1": 7}
"""Where each exchange of the conversation ledger sits in the list, newest first."""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def rows(app: BrowseApp) -> list[list[str]]:
    table = app.list_screen.query_one(DataTable)
    return [[str(c).strip() for c in table.get_row_at(i)] for i in range(table.row_count)]


def keys(app: BrowseApp) -> list[str]:
    table = app.list_screen.query_one(DataTable)
    return [str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value) for i in range(table.row_count)]


def texts(screen: Any, selector: str) -> str:
    return "\n".join(str(w.render()) for w in screen.query(selector))


async def open_row(app: BrowseApp, pilot: Any, action: str, *press: str) -> None:
    app.list_screen.query_one(DataTable).move_cursor(row=ROW[action])
    await pilot.press(*press)
    await settle(pilot)


async def test_one_line_per_exchange_with_its_figures_at_120(conversation_ledger: Ledger) -> None:
    """The first screen lists exchanges, not rows: each line has status, host and path, size, duration,
    the model whole, tokens and a small cost with its significant digits (never $0.0000)."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ExchangesScreen)
        assert keys(app) == list(ROW)
        c1 = rows(app)[ROW["c1"]]
        assert c1[:4] == ["11-29 09:01:00", "alpha/s9", "POST", "200"]
        assert c1[4].startswith("api.openai.com/v1/chat/")
        assert c1[5:] == ["284 B", "420ms", "gpt-4o-mini", "150→15", "$0.000031"]
        assert rows(app)[ROW["c3"]][7] == "claude-sonnet-4-5"
        assert rows(app)[ROW["c3"]][3] == "200*"  # the stream was cut: the answer is partial
        assert rows(app)[ROW["c6"]][4].startswith("▸2 dispatch github.get")
        assert "8 exchanges shown" in str(app.screen.query_one("#status", Static).render())
        assert "$0.0000 " not in " ".join(" ".join(r) + " " for r in rows(app))


async def test_narrow_terminal_drops_the_least_useful_columns(conversation_ledger: Ledger) -> None:
    """At 80 columns size, method, agent and duration go; status, path, model, tokens and cost stay."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(80, 30)) as pilot:
        await settle(pilot)
        table = app.list_screen.query_one(DataTable)
        shown = [str(k.value) for k in table.columns]
        assert "size" not in shown and "method" not in shown and "who" not in shown
        assert {"status", "target", "model", "tokens", "cost"} <= set(shown)
        await pilot.resize_terminal(120, 30)
        await settle(pilot)
        assert {"size", "duration", "who"} <= {str(k.value) for k in table.columns}


async def test_space_expands_messages_under_their_exchange(conversation_ledger: Ledger) -> None:
    """`space` shows a WebSocket exchange's messages beneath it, `left` folds them; enter on a message
    opens the exchange on its inner tab."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c5", "space")
        assert keys(app)[ROW["c5"] : ROW["c5"] + 4] == ["c5", "c5/c5-ws:0", "c5/c5-ws:1", "c5/c5-ws:2"]
        assert "└ → websocket.client" in rows(app)[ROW["c5"] + 1][4]
        assert rows(app)[ROW["c5"]][4].startswith("▾3 ws.example.com/feed")
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ExchangeScreen)
        assert app.screen.query_one("#tabs", TabbedContent).active == "tab-inner"
        assert "subscribe" in texts(app.screen, "#pane-inner Static")
        await pilot.press("escape")
        app.list_screen.query_one(DataTable).move_cursor(row=ROW["c5"])
        await pilot.press("left")
        await settle(pilot)
        assert len(keys(app)) == 8


async def test_v_switches_to_events_and_back(conversation_ledger: Ledger) -> None:
    """`v` shows the events one by one under the same filter, and `v` again the exchanges."""
    app = make_app(conversation_ledger, question="agent alpha")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, EventsScreen)
        assert "agent=alpha" in str(app.screen.query_one("#understood", Static).render())
        assert len(keys(app)) == 16  # c1-c4, c7, c8 (2 each) and c6's four door events
        await pilot.press("v")
        await settle(pilot)
        assert isinstance(app.screen, ExchangesScreen) and len(keys(app)) == 7


async def test_exchange_tabs_request_answer_timing_row(conversation_ledger: Ledger) -> None:
    """enter opens the exchange; 1..6 pick tabs: the exact heads with the redacted names, a gzip answer
    decoded for reading, the timing, and every Ledger row; `m` cycles the bodies to hex."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c7", "enter")
        screen = app.screen
        assert isinstance(screen, ExchangeScreen)
        request = texts(screen, "#pane-request Static")
        assert "Authorization: Bearer [OPENAI_API_KEY]" in request and "redacted: OPENAI_API_KEY" in request
        await pilot.press("2")
        assert screen.query_one("#tabs", TabbedContent).active == "tab-answer"
        answer = texts(screen, "#pane-answer Static")
        assert (
            "gzip-decoded for reading; the Ledger keeps the encoded bytes" in answer
            and '"items": [' in answer
        )
        await pilot.press("5")
        assert screen.query_one("#tabs", TabbedContent).active == "tab-timing"
        timing = texts(screen, "#pane-timing Static")
        assert "duration    35ms" in timing and "first byte  not recorded" in timing
        await pilot.press("6")
        assert "complete, 40 bytes binary, sha256" in texts(screen, "#pane-row Static")
        await pilot.press("3")  # no conversation for this exchange: the key does nothing
        assert screen.query_one("#tabs", TabbedContent).active == "tab-row"
        await pilot.press("m", "m")
        await settle(pilot)
        assert screen.mode == "hex" and "00000000  7b 22 69 74" in texts(screen, "#pane-answer Static")
        await pilot.press("escape")
        await open_row(app, pilot, "c8", "enter", "2")
        assert "image/png, 208 bytes" in texts(app.screen, "#pane-answer Static")


async def test_conversation_tab_of_a_tool_call_and_a_stream(conversation_ledger: Ledger) -> None:
    """The conversation tab shows the system prompt, messages by role, the tool call and its result, the
    tools offered with their Directory row, and the streamed answer reassembled with tokens and cost."""
    info = ToolInfo("github.get_repo", {"id": "tool/github.get_repo", "name": "github.get_repo"})
    app = make_app(conversation_ledger, directory=lambda name: info if name == info.name else None)
    async with app.run_test(size=(120, 60)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c2", "enter", "3")
        screen = app.screen
        assert isinstance(screen, ExchangeScreen)
        assert screen.query_one("#tabs", TabbedContent).active == "tab-conversation"
        conv = texts(screen, "#pane-conversation Static")
        assert "You are a terse assistant." in conv and "Weather in Paris?" in conv
        assert '→ get_weather({"city": "Paris"})  [call_1]' in conv and '"sky": "sunny"' in conv
        assert (
            "[Directory: tool/github.get_repo]" in conv
            and "get_weather — Weather for a city  [no Directory" in conv
        )
        answer = screen.query_one("#pane-conversation .turn-answer", Static)
        assert str(answer.render()) == "It is 18°C and sunny in Paris."
        assert "streamed · stop: stop · tokens 190→12 · cost $0.000036" in str(answer.border_title)
        await pilot.press("escape")
        await open_row(app, pilot, "c3", "enter", "3")
        cut = texts(app.screen, "#pane-conversation Static")
        assert "partial: the stream stopped after 7 server-sent events" in cut and "Checking Paris." in cut


async def test_replay_export_and_curl_keys(conversation_ledger: Ledger) -> None:
    """From the list: `r` replays through the injected hook and shows its diff; `e` asks the format and
    exports the exchange, `E` every exchange shown; `y` copies the request as curl, secrets as [NAME]."""
    replayed: list[str] = []
    exported: list[tuple[str, list[str]]] = []

    def replayer(action_id: str) -> str:
        replayed.append(action_id)
        return "status: 200 -> 200\nbody: differs at byte 12"

    def exporter(fmt: str, actions: list[str]) -> str:
        exported.append((fmt, actions))
        return f"exported {len(actions)} exchanges as {fmt} to x.{fmt}"

    app = make_app(conversation_ledger, replayer=replayer, exporter=exporter)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c1", "r")
        assert replayed == ["c1"] and isinstance(app.screen, OutputScreen)
        assert "body: differs at byte 12" in app.screen.text
        await pilot.press("escape", "e")
        await settle(pilot)
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("h")
        await settle(pilot)
        await pilot.press("E", "j")
        await settle(pilot)
        assert exported == [("har", ["c1"]), ("jsonl", list(ROW))]
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, OutputScreen)
        curl = app.screen.text
        assert curl.startswith("curl") and "https://api.openai.com/v1/chat/completions" in curl
        assert "-H 'Authorization: Bearer [OPENAI_API_KEY]'" in curl and '"gpt-4o-mini"' in curl
        assert app.clipboard == curl


async def test_keys_from_the_open_exchange(conversation_ledger: Ledger) -> None:
    """The same keys work inside an exchange: replay, export (escape cancels), curl of the door's
    upstream request, and `d` opens the dispatched tool's Directory row."""
    info = ToolInfo("github.get_repo", {"name": "github.get_repo", "description": "Read a repository"})
    replayed: list[str] = []

    def replayer(action_id: str) -> str:
        replayed.append(action_id)
        return "same"

    app = make_app(
        conversation_ledger, directory=lambda name: info if name == info.name else None, replayer=replayer
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c6", "enter")
        detail = app.screen
        assert isinstance(detail, ExchangeScreen)
        assert "Authorization: token [GITHUB_TOKEN]" in texts(detail, "#pane-inner Static")
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, OutputScreen) and "description: Read a repository" in app.screen.text
        await pilot.press("escape", "y")
        await settle(pilot)
        assert isinstance(app.screen, OutputScreen)
        assert (
            "https://api.github.com/repos/acme/app" in app.screen.text and "[GITHUB_TOKEN]" in app.screen.text
        )
        await pilot.press("escape", "e", "escape", "r")
        await settle(pilot)
        assert replayed == ["c6"]


async def test_directory_key_without_a_tool_or_a_directory(conversation_ledger: Ledger) -> None:
    """`d` on an exchange that names no tool says so; with no Directory connected it says that."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await open_row(app, pilot, "c1", "d")
        assert isinstance(app.screen, ExchangesScreen)
        await open_row(app, pilot, "c6", "d")
        assert isinstance(app.screen, OutputScreen) and "no Directory is connected" in app.screen.text


async def test_help_lists_every_key(conversation_ledger: Ledger) -> None:
    """`?` opens the help screen naming every key; escape closes it."""
    app = make_app(conversation_ledger)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        for key in ("enter", "space", "v", "/", "f", "c", "r", "e", "y", "d", "m", "1 … 7", "?"):
            assert f"\n{key}" in "\n" + app.screen.text.replace("\n\n", "\n")
        await pilot.press("escape")
        assert isinstance(app.screen, ExchangesScreen)


async def test_filter_box_takes_plain_words_on_exchanges(sqlite_sample: Ledger) -> None:
    """The filter box reads `ledger query` words; status and model (on answers) filter exchanges too."""
    app = make_app(sqlite_sample)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"errors from agent alpha", "enter")
        await settle(pilot)
        assert keys(app) == ["a2"]
        await pilot.press("escape")
        await settle(pilot)
        assert keys(app) == ["a5", "a4", "a3", "a2", "a1"]


async def test_follow_mode_puts_new_exchanges_on_top(sqlite_sample: Ledger) -> None:
    """While following, a new exchange appears on top by itself; `f` pauses."""
    app = make_app(sqlite_sample, follow=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        at = T1 + timedelta(days=1)
        late = Event(
            event_id="late", action_id="late", kind="http.request", direction="out", at=at, method="GET"
        )
        sqlite_sample.append(Batch("test", 3, (late,)))
        for _ in range(40):
            await pilot.pause(0.05)
            if keys(app)[0] == "late":
                break
        assert keys(app)[0] == "late"
        await pilot.press("f")
        assert "paused" in str(app.list_screen.query_one("#status", Static).render())
