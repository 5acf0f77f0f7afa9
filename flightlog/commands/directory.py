"""The Directory on the command line: find, get, manifest, contracts, mcp, and import/export."""

from __future__ import annotations

import typer

from flightlog.commands.pending import not_built

directory_app = typer.Typer(help="Import and export the Directory.", no_args_is_help=True)
import_app = typer.Typer(help="Import rows from an OpenAPI document or an MCP server.")
directory_app.add_typer(import_app, name="import")


def register(app: typer.Typer) -> None:
    """Add the Directory commands to the root app."""
    app.add_typer(directory_app, name="directory")

    @app.command()
    def find(words: list[str]) -> None:
        """Rows matching WORDS, each with its score, layer and the words that matched."""
        not_built("find", 4)

    @app.command()
    def get(ids: list[str]) -> None:
        """Bounded slices of rows, framed `@@ id [start..end of total]`."""
        not_built("get", 4)

    @app.command()
    def manifest() -> None:
        """The Directory as TSV, one row per capability."""
        not_built("manifest", 4)

    @app.command()
    def contracts(tool: str) -> None:
        """Every runnable form of one tool's canonical call."""
        not_built("contracts", 4)

    @app.command()
    def mcp() -> None:
        """Serve the Directory's agent API over MCP stdio."""
        not_built("mcp", 4)


@import_app.command("openapi")
def import_openapi(file: str) -> None:
    """Each operation of an OpenAPI document becomes a tool row."""
    not_built("directory import openapi", 4)


@import_app.command("mcp")
def import_mcp(command: list[str]) -> None:
    """An MCP server's tools/list becomes rows with MCP contracts."""
    not_built("directory import mcp", 4)


@directory_app.command()
def export(folder: str) -> None:
    """Write the Directory back out as a folder."""
    not_built("directory export", 4)
