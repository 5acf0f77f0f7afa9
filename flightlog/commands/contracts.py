"""`flightlog contracts` and `flightlog directory import ...`: call forms and importers."""

from __future__ import annotations

import typer

from flightlog.commands.directory import directory_app
from flightlog.commands.pending import not_built

import_app = typer.Typer(help="Import rows from an OpenAPI document or an MCP server.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add `contracts` to the root app and `import` to the `directory` group."""
    directory_app.add_typer(import_app, name="import")

    @app.command()
    def contracts(tool: str) -> None:
        """Every runnable form of one tool's canonical call."""
        not_built("contracts", 4)


@import_app.command("openapi")
def import_openapi(file: str) -> None:
    """Each operation of an OpenAPI document becomes a tool row."""
    not_built("directory import openapi", 4)


@import_app.command("mcp")
def import_mcp(command: list[str]) -> None:
    """An MCP server's tools/list becomes rows with MCP contracts."""
    not_built("directory import mcp", 4)
