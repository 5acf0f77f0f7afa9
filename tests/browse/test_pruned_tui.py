"""The browser shows a pruned payload as pruned (issue 52): when and why, where the body was."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.ledger import open_ledger
from storage.retention.prune import prune

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_browser_shows_a_pruned_body_as_pruned(tmp_path: Path) -> None:
    """The browser's event detail says "pruned on DATE (reason)" where the body was."""
    from textual.widgets import DataTable

    from tests.browse.sample import fill
    from tests.browse.tui_support import make_app, settle
    from tui.detail import DetailScreen

    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    fill(ledger)
    with ledger.engine.connect() as conn:
        sha = conn.exec_driver_sql(
            "SELECT payload_sha256 FROM events WHERE event_id = 'a1-response'"
        ).scalar()
    prune(ledger, [str(sha)], "erasure request 9")
    app = make_app(ledger, view="events")
    async with app.run_test(size=(140, 50)) as pilot:
        await settle(pilot)
        app.events_screen.query_one("#events", DataTable).move_cursor(
            row=9
        )  # a1-response (the prune record is the newest event)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DetailScreen) and screen.event.event_id == "a1-response"
        notes = " ".join(str(w.render()) for w in screen.query(".note"))
        assert "pruned on" in notes and "(erasure request 9)" in notes
    ledger.close()
