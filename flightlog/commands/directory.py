"""The Directory on the command line: find, get, manifest, contracts, mcp, and import/export."""

from __future__ import annotations

import typer

from flightlog.commands.pending import not_built

directory_app = typer.Typer(help="Import and export the Directory.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the Directory commands to the root app (`directory import` and `contracts` live in
    `flightlog.commands.contracts`)."""
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
    def mcp() -> None:
        """Serve the Directory's agent API over MCP stdio."""
        not_built("mcp", 4)


@directory_app.command()
def export(folder: str) -> None:
    """Write the Directory back out as a folder."""
    not_built("directory export", 4)
