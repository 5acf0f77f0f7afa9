"""Helpers for the TUI tests: an app over the sample ledger with a frozen clock, and a settle step."""

from __future__ import annotations

import contextlib

from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from flightlog.commands.browse import mcp_reader
from storage.ledger import Ledger
from tests.browse.sample import NOW
from tui.app import BrowseApp, View
from tui.source import DirectoryLookup, Exporter, LedgerSource, Replayer


def make_app(
    ledger: Ledger,
    *,
    question: str = "",
    follow: float | None = None,
    directory: DirectoryLookup | None = None,
    replayer: Replayer | None = None,
    exporter: Exporter | None = None,
    view: View = "exchanges",
) -> BrowseApp:
    """The browser over `ledger`, clock frozen at the sample's NOW, following off unless asked; MCP
    messages under an exchange are read as `flightlog browse` reads them (`mcp_reader`)."""
    source = LedgerSource(
        ledger, directory=directory, replayer=replayer, exporter=exporter, mcp_reader=mcp_reader(ledger)
    )
    return BrowseApp(source, question=question, follow_seconds=follow, now=lambda: NOW, view=view)


async def settle(pilot: Pilot[None]) -> None:
    """Wait until every worker has finished and the screen has drawn what they gave it."""
    for _ in range(3):
        with contextlib.suppress(WorkerCancelled):  # an exclusive worker replaced by a newer one
            await pilot.app.workers.wait_for_complete()
        await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.05)
