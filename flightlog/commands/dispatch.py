"""`flightlog call` and `flightlog token`: the dispatch door and scoped tokens."""

from __future__ import annotations

import typer

from flightlog.commands.pending import not_built

token_app = typer.Typer(help="Mint, attenuate and inspect scoped tokens.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add `call` and the `token` group to the root app."""
    app.add_typer(token_app, name="token")

    @app.command()
    def call(tool: str) -> None:
        """Call a Directory row with one canonical call."""
        not_built("call", 5)


@token_app.command()
def mint() -> None:
    """Mint a scoped token from the root key."""
    not_built("token mint", 5)


@token_app.command()
def attenuate() -> None:
    """Narrow a token without the root key."""
    not_built("token attenuate", 5)


@token_app.command()
def inspect() -> None:
    """Show a token's limits."""
    not_built("token inspect", 5)
