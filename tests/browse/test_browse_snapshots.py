"""SVG snapshots of the browser's screens at 80 and 120 columns over the fixed samples (clock frozen, no
following): the exchange list, an exchange's tabs, conversations with a tool call and a streamed answer,
the events list, counts and help.

Update after an intended change of the look with `pytest tests/browse/test_browse_snapshots.py
--snapshot-update`, and read the SVGs in the report before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from storage.ledger import Ledger
from tests.browse.conversations import conversation_ledger
from tests.browse.mcp_sample import mcp_ledger
from tests.browse.sample import sqlite_sample
from tests.browse.tui_support import make_app, settle

__all__ = ["conversation_ledger", "mcp_ledger", "sqlite_sample"]
WIDTHS = pytest.mark.parametrize("width", [80, 120])
SnapCompare = Callable[..., bool]
C1, C2, C3, C5 = 7, 6, 5, 3
"""Rows of the conversation ledger's exchanges (newest first)."""
WEATHER, ADD = 2, 4
"""Rows of the MCP ledger: the HTTP tools/call answered in its SSE answer, the stdio call answered
with an error."""


def at_row(row: int, *keys: str) -> Callable[[Pilot[None]], Any]:
    """A run_before that waits for the first page, moves to `row` and presses `keys`."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        pilot.app.screen.query_one(DataTable).move_cursor(row=row)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        # The footer and scrollbars settle a few frames after the data: wait them out, then redraw.
        await pilot.pause(0.3)
        pilot.app.screen.refresh(layout=True)
        await pilot.pause(0.1)

    return run_before


@WIDTHS
def test_exchanges(snap_compare: SnapCompare, sqlite_sample: Ledger, width: int) -> None:
    """One line per exchange: status or error, path, size, duration, model, tokens, cost; fitted to width."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=(width, 20), run_before=at_row(2))


@WIDTHS
def test_exchanges_expanded(snap_compare: SnapCompare, conversation_ledger: Ledger, width: int) -> None:
    """Model calls with small costs, a door call and a WebSocket exchange expanded to its messages."""
    app = make_app(conversation_ledger)
    assert snap_compare(app, terminal_size=(width, 24), run_before=at_row(C5, "space"))


@WIDTHS
def test_conversation_tool_call(snap_compare: SnapCompare, conversation_ledger: Ledger, width: int) -> None:
    """A chat call whose answer is a tool call: system prompt, the user's message, tools offered."""
    app = make_app(conversation_ledger)
    assert snap_compare(app, terminal_size=(width, 40), run_before=at_row(C1, "enter", "3"))


@WIDTHS
def test_conversation_streamed(snap_compare: SnapCompare, conversation_ledger: Ledger, width: int) -> None:
    """A streamed answer reassembled, after the tool call and its result, with tokens and cost."""
    app = make_app(conversation_ledger)
    assert snap_compare(app, terminal_size=(width, 44), run_before=at_row(C2, "enter", "3"))


def test_conversation_partial_stream(snap_compare: SnapCompare, conversation_ledger: Ledger) -> None:
    """An Anthropic stream cut inside a tool call says where it stopped."""
    app = make_app(conversation_ledger)
    assert snap_compare(app, terminal_size=(120, 36), run_before=at_row(C3, "enter", "3"))


@WIDTHS
def test_exchange_request_tab(snap_compare: SnapCompare, sqlite_sample: Ledger, width: int) -> None:
    """The request tab: exact head, the redacted name, the JSON body pretty."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=(width, 30), run_before=at_row(4, "enter"))


def test_events_screen(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """The events one by one (`v`), under a filter read from plain words."""
    app = make_app(sqlite_sample, question="requests to api.openai.com from agent beta", view="events")
    assert snap_compare(app, terminal_size=(120, 20), run_before=at_row(0))


def test_event_detail_sse(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """An SSE answer's event detail: metadata, exact head, one box per server-sent event."""
    app = make_app(sqlite_sample, view="events")
    assert snap_compare(app, terminal_size=(120, 42), run_before=at_row(8, "enter"))


@WIDTHS
def test_counts(snap_compare: SnapCompare, sqlite_sample: Ledger, width: int) -> None:
    """Events per hour, and per model, tool and session sparklines of events, tokens and cost."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=(width, 50), run_before=at_row(0, "c"))


@WIDTHS
def test_mcp_calls(snap_compare: SnapCompare, mcp_ledger: Ledger, width: int) -> None:
    """MCP calls in the list: a stdio session's calls one per line (tool, ok or the error's code,
    duration), the session with its exit; HTTP exchanges named by the tool, one expanded to its
    call and result messages."""
    app = make_app(mcp_ledger)
    assert snap_compare(app, terminal_size=(width, 20), run_before=at_row(WEATHER, "space"))


@WIDTHS
def test_mcp_call_tab(snap_compare: SnapCompare, mcp_ledger: Ledger, width: int) -> None:
    """A stdio call opened: its tool, its arguments pretty, and the error it was answered with."""
    app = make_app(mcp_ledger)
    assert snap_compare(app, terminal_size=(width, 24), run_before=at_row(ADD, "enter"))


def test_help(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """Every key on one page."""
    assert snap_compare(
        make_app(sqlite_sample), terminal_size=(80, 36), run_before=at_row(0, "question_mark")
    )
