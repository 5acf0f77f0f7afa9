"""The browser's filter bar reads an order as an order (issue 51): "slowest calls on DAY" lists the
exchanges slowest first and says so under the list, where before it read `sort=slowest` and kept
the list newest first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.events import Batch
from storage.ledger import Ledger, open_ledger
from tests.browse.tui_support import make_app, settle
from tests.support.question_table import recorded_events


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Ledger]:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(Batch("t", 1, recorded_events()))
    yield ledger
    ledger.close()


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_slowest_calls_list_slowest_first(recorded: Ledger) -> None:
    """Typed into the filter bar, 'slowest calls on 2026-11-25' shows that day's exchanges slowest
    first, and the status line names the order."""
    from textual.widgets import Input, Static

    app = make_app(recorded)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        screen = app.list_screen
        screen.query_one("#filter", Input).value = "slowest calls on 2026-11-25"
        await pilot.press("slash", "enter")
        await settle(pilot)
        assert [x.action_id for x in screen.items][:4] == ["x9", "x4", "x17", "x6"]
        status: Any = screen.query_one("#status", Static).render()
        assert "slowest first" in str(status), str(status)
