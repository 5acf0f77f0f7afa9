"""SVG snapshots of the browser's main screens over the fixed sample (clock frozen, no following).

Update after an intended change of the look with `pytest tests/browse/test_browse_snapshots.py
--snapshot-update`, and read the SVGs in the report before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from storage.ledger import Ledger
from tests.browse.sample import sqlite_sample
from tests.browse.tui_support import make_app, settle

__all__ = ["sqlite_sample"]
SIZE = (150, 42)
SnapCompare = Callable[..., bool]


def at_row(row: int, *keys: str) -> Callable[[Pilot[None]], Any]:
    """A run_before that waits for the first page, moves to `row` and presses `keys`."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        pilot.app.screen.query_one("#events", DataTable).move_cursor(row=row)
        await pilot.press(*keys)
        await settle(pilot)
        # The footer and scrollbars settle a few frames after the data: wait them out, then redraw.
        await pilot.pause(0.3)
        pilot.app.screen.refresh(layout=True)
        await pilot.pause(0.1)

    return run_before


def test_events_screen(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """The table of events, newest first, under a filter read from plain words."""
    app = make_app(sqlite_sample, question="requests to api.openai.com from agent beta")
    assert snap_compare(app, terminal_size=SIZE, run_before=at_row(0))


def test_all_events_screen(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """Every event, the cursor on the third row."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=SIZE, run_before=at_row(2))


def test_detail_screen_sse(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """An SSE answer's detail: metadata, exact head, one box per server-sent event."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=SIZE, run_before=at_row(8, "enter"))


def test_action_screen(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """The request beside its answer."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=SIZE, run_before=at_row(4, "a"))


def test_counts_screen(snap_compare: SnapCompare, sqlite_sample: Ledger) -> None:
    """Events per hour as a sparkline and the tables by model, tool and session."""
    assert snap_compare(make_app(sqlite_sample), terminal_size=(150, 50), run_before=at_row(0, "c"))
