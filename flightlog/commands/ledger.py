"""`flightlog ledger ...`: read events, actions and payloads, count, query and verify the Ledger."""

from __future__ import annotations

import typer

from flightlog.commands.pending import not_built

ledger_app = typer.Typer(help="Read and verify the Ledger.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the `ledger` group to the root app."""
    app.add_typer(ledger_app, name="ledger")


@ledger_app.command()
def row(event_id: str) -> None:
    """Print one event whole."""
    not_built("ledger row", 2)


@ledger_app.command()
def action(action_id: str) -> None:
    """Print every event of one action."""
    not_built("ledger action", 2)


@ledger_app.command()
def blob(sha256: str) -> None:
    """Write a payload's exact bytes to stdout."""
    not_built("ledger blob", 2)


@ledger_app.command()
def verify() -> None:
    """Re-hash stored payloads; report corrupted, missing and orphaned ones."""
    not_built("ledger verify", 2)


@ledger_app.command()
def counts() -> None:
    """Counted views by hour, session, turn, kind, agent, model, tool or task."""
    not_built("ledger counts", 6)


@ledger_app.command()
def query() -> None:
    """Events matching a filter or a question in plain words."""
    not_built("ledger query", 6)
