"""`flightlog proxy`, `run` and `env`: the recording proxy and the variables that route through it."""

from __future__ import annotations

from typing import Annotated

import typer

from flightlog.commands.pending import not_built


def register(app: typer.Typer) -> None:
    """Add the capture commands to the root app."""

    @app.command()
    def proxy(
        listen: Annotated[str, typer.Option(help="HOST:PORT of the forward proxy.")] = "127.0.0.1:8080",
        mode: Annotated[
            list[str] | None,
            typer.Option(help="regular, or reverse:URL[@PORT] for inbound traffic; repeatable."),
        ] = None,
        ledger: Annotated[str | None, typer.Option(help="Ledger database URL.")] = None,
        blobs: Annotated[str | None, typer.Option(help="Blob store URL (file:// or s3://).")] = None,
        secrets: Annotated[str | None, typer.Option(help="File of NAME=value secrets to redact.")] = None,
    ) -> None:
        """Run the recording proxy (mitmproxy with flightlog's addons)."""
        not_built("proxy", 3)

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def run(ctx: typer.Context) -> None:
        """Run COMMAND through the recording proxy: flightlog run [options] -- COMMAND ..."""
        not_built("run", 3)

    @app.command()
    def env() -> None:
        """Print export lines that route a shell's programs through the proxy."""
        not_built("env", 3)
