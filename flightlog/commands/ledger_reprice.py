"""`flightlog ledger reprice`: recorded model calls priced with today's prices, beside their recorded cost.

A view, never a write (the Ledger is append-only; `recording.reprice` says why nothing is stored).
Added to `ledger_app` here, so the command line loads the `ledger` group from this module.
"""

from __future__ import annotations

from typing import Any

import typer

from flightlog.commands.ledger import ledger_app, read_worded
from flightlog.commands.options import (
    NONE_GIVEN,
    BlobsOpt,
    Given,
    JsonOpt,
    LedgerOpt,
    WordsArg,
    with_filters,
)
from flightlog.settings import load_settings
from formats.terminal_text import json_text, shown
from tui.figures import spend


@ledger_app.command("reprice")
@with_filters
def reprice_command(
    words: WordsArg = None,
    filters: Given = NONE_GIVEN,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recorded model calls priced with today's prices (genai-prices and FLIGHTLOG_HOME/prices.toml),
    per model beside the cost recorded with them; nothing in the Ledger changes."""
    from recording.prices import PriceTable
    from recording.reprice import reprice_answer

    settings = load_settings()
    table = PriceTable.load(settings.home / "prices.toml")
    answer = read_worded(ledger_url, words, filters, lambda r, flt, _: reprice_answer(r, flt, table))
    if as_json:
        typer.echo(json_text(answer))
        return
    _table(answer)


def _table(answer: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("model", "calls", "recorded (USD)", "today (USD)", box=None)
    for m in [*answer["models"], {**answer, "model": "all"}]:
        recorded = spend(m["recorded_usd"], m["recorded_unpriced"]) or "$0"
        today = spend(m["repriced_usd"], m["repriced_unpriced"]) or "$0"
        table.add_row(Text(shown(m["model"])), f"{m['calls']:,}", recorded, today)
    Console(soft_wrap=True).print(table)
    typer.echo(f"prices: {shown(answer['prices'])}; the recorded costs are unchanged", err=True)
