"""MCP calls in the browser, driven with Pilot over a real SQLite ledger recorded by the recording's own
functions (`tests.browse.mcp_sample`): stdio calls are exchanges of their own, and every call shows
its tool, its arguments and the result it was paired with, also when that result came on another
stream."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import DataTable, TabbedContent

from storage.ledger import Ledger
from tests.browse.mcp_sample import mcp_ledger
from tests.browse.tui_support import make_app, settle
from tui.app import BrowseApp
from tui.exchange_detail import ExchangeScreen

__all__ = ["mcp_ledger"]
pytestmark = pytest.mark.anyio
ROW = {"h2": 0, "h3": 1, "h1": 2, "slow": 3, "add": 4, "echo": 5, "initialize": 6, "session": 7}
"""Where each exchange of the MCP ledger sits in the list, newest first."""


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def rows(app: BrowseApp) -> list[str]:
    table = app.list_screen.query_one(DataTable)
    return [" ".join(str(c).strip() for c in table.get_row_at(i)) for i in range(table.row_count)]


def mcp_text(screen: Any) -> str:
    return "\n".join(f"[{w.border_title}]\n{w.render()}" for w in screen.query("#pane-mcp Static"))


async def open_row(app: BrowseApp, pilot: Any, name: str) -> ExchangeScreen:
    app.list_screen.query_one(DataTable).move_cursor(row=ROW[name])
    await pilot.press("enter")
    await settle(pilot)
    assert isinstance(app.screen, ExchangeScreen)
    return app.screen


async def test_stdio_calls_are_exchanges_paired_with_their_results(mcp_ledger: Ledger) -> None:
    """Each stdio request is a line of its own with its tool, `ok` or the error's code, and the time
    its result took; an unanswered call has no status; the session is a line with its exit."""
    app = make_app(mcp_ledger)
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        lines = rows(app)
        assert len(lines) == 8
        echo, add, slow = lines[ROW["echo"]], lines[ROW["add"]], lines[ROW["slow"]]
        assert "MCP ok tools/call echo · python server.py" in echo and "12ms" in echo
        assert "-32602 tools/call add" in add and "30ms" in add
        assert "… tools/call slow" in slow and "ms" not in slow
        assert "exit 0 session · python server.py" in lines[ROW["session"]]
        assert "mcp weather · tools.example.com/mcp" in lines[ROW["h1"]]


async def test_a_call_shows_tool_arguments_and_result(mcp_ledger: Ledger) -> None:
    """enter on a call opens its `mcp` tab: the tool and the JSON-RPC id, the arguments pretty, the
    result (or the error) and how long it took; `7` picks the tab from another one."""
    app = make_app(mcp_ledger)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        screen = await open_row(app, pilot, "echo")
        assert screen.query_one("#tabs", TabbedContent).active == "tab-mcp"
        text = mcp_text(screen)
        assert "[tools/call echo (id 1)]" in text and '"text": "hello"' in text
        assert "result     (after 12 ms)" in text and '"isError": false' in text
        await pilot.press("1")
        assert screen.query_one("#tabs", TabbedContent).active == "tab-request"
        await pilot.press("7")
        assert screen.query_one("#tabs", TabbedContent).active == "tab-mcp"
        await pilot.press("escape")
        await settle(pilot)
        text = mcp_text(await open_row(app, pilot, "add"))
        assert "[tools/call add (id 2)]" in text and '"a": 2' in text
        assert "error      -32602: missing argument b  (after 30 ms)" in text
        await pilot.press("escape")
        await settle(pilot)
        text = mcp_text(await open_row(app, pilot, "slow"))
        assert "result     (none recorded" in text


async def test_http_calls_pair_across_streams(mcp_ledger: Ledger) -> None:
    """Over HTTP a message is a pointer into its exchange's bytes: the call's arguments are read from
    the POST, and a result that came on the session's GET stream is paired with it, from either side."""
    app = make_app(mcp_ledger)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot)
        text = mcp_text(await open_row(app, pilot, "h1"))
        assert '"city": "Paris"' in text and "sunny, 18 C" in text and "(after 40 ms)" in text
        await pilot.press("escape")
        await settle(pilot)
        for name in ("h2", "h3"):
            text = mcp_text(await open_row(app, pilot, name))
            assert "[tools/call forecast (id 8)]" in text and '"days": 3' in text
            assert "(after 2000 ms, on another stream)" in text and "rain, then sun" in text
            await pilot.press("escape")
            await settle(pilot)
        app.list_screen.query_one(DataTable).move_cursor(row=ROW["h1"])
        await pilot.press("space")
        await settle(pilot)
        lines = rows(app)
        assert "└ → tools/call weather" in lines[ROW["h1"] + 1]
        assert "└ ← tools/call.result weather" in lines[ROW["h1"] + 2]
