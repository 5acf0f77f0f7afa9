"""The `flightlog` command: one Typer app whose commands live in `flightlog.commands.*`.

Each command module exposes `register(app)`; heavy imports (mitmproxy, textual, the MCP SDK) happen
inside the commands so that `flightlog --help` stays fast. Errors from any package are translated
here into one line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from flightlog.commands import browse, capture, contracts, directory, dispatch, ledger, mcp_record, questions

app = typer.Typer(
    name="flightlog",
    help="Record what AI agents do (the Ledger) and list what they can do (the Directory).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for module in (capture, ledger, directory, contracts, dispatch, browse, questions, mcp_record):
    module.register(app)


def main() -> None:
    """Console entry point: run the app, turning known errors into one clear line."""
    from flightlog.failures import known_errors

    try:
        app()
    except known_errors() as e:
        print(f"flightlog: {e}", file=sys.stderr)
        sys.exit(1)
