"""`flightlog uses`, `task` and `trace`: the join of the Ledger and the Directory.

`uses` and `task` list events (oldest first); `trace` follows one event to its tool's contract and
checks the recorded request against it (`catalog.join`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from flightlog.commands.directory import open_from_settings
from flightlog.commands.options import DirectoryOpt, JsonOpt, LedgerOpt
from flightlog.settings import load_settings


def uses(
    tool: Annotated[str, typer.Argument(help="A tool row's name.")],
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every Ledger event that used a tool, oldest first."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog import join

    _events(join.tool_uses(load_settings().open_ledger(ledger).engine, tool), as_json)


def task(
    name: Annotated[str, typer.Argument(help="A task name.")],
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Everything done under a task, oldest first."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog import join

    _events(join.task_events(load_settings().open_ledger(ledger).engine, name), as_json)


def trace(
    event_id: Annotated[str, typer.Argument(help="A Ledger event id.")],
    directory: DirectoryOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """From an event to its tool's contract, checking the recorded request against it."""
    # deferred: mitmproxy/httpx, the Directory (SQLAlchemy) load slowly; other commands start without them
    from addons.door.assembly import find_in
    from catalog import join
    from catalog.contracts import render_upstream

    settings = load_settings()
    opened = settings.open_ledger(ledger)
    rows = open_from_settings(directory, ledger)
    found = join.trace(opened.engine, opened.payload, find_in(rows), render_upstream, event_id)
    if as_json:
        typer.echo(json.dumps(found.as_dict(), indent=2, default=str, ensure_ascii=False))
    else:
        typer.echo(f"{event_id}: action {found.event['action_id']}, tool {found.tool or '-'}")
        for c in found.checks:
            typer.echo(f"  {c.event_id}: {'matches the contract' if c.matches else 'MISMATCH: ' + c.differs}")
        if found.note:
            typer.echo(f"  {found.note}")
    if found.mismatch:
        raise typer.Exit(1)


def _events(events: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(events, indent=2, default=str))
        return
    if not events:
        typer.echo("no events")
    for e in events:
        status = e["status"] if e["status"] is not None else ""
        typer.echo(
            f"{e['at']}  {e['action_id']}  {e['kind']:<28} {status!s:<4} {e.get('error') or e['url'] or ''}"
        )
