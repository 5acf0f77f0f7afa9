"""A placeholder for commands a later issue builds, so `--help` lists the whole interface."""

from __future__ import annotations

import typer


def not_built(command: str, issue: int) -> None:
    """Say plainly that a command exists in the design but is not built yet."""
    typer.echo(f"flightlog {command}: not built yet (issue {issue})", err=True)
    raise typer.Exit(2)
