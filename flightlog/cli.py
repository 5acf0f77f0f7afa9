"""The `flightlog` command: one Typer app, and the table of where each command lives.

Each command is a module-level function in `flightlog.commands.<module>`; a command group (`ledger`,
`directory`, `token`) is a Typer app in the module named after it. This module is the only place
that adds them to the root app, so the list below is the whole command line. Options several
commands share are defined once in `flightlog.commands.options`. Heavy imports (mitmproxy, textual,
the MCP SDK) happen inside the commands so that `flightlog --help` stays fast. Errors from any
package are translated here into one line and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from flightlog.commands import (
    agent_api,
    browse,
    call,
    contracts,
    directory,
    drift,
    export,
    join,
    ledger,
    mcp_record,
    proxy,
    replay,
    token,
)
from flightlog.failures import known_errors

PASS_THROUGH: dict[str, Any] = {"allow_extra_args": True, "ignore_unknown_options": True}

# (name, command, click context settings), in the order `flightlog --help` lists them.
COMMANDS: tuple[tuple[str, Callable[..., None], dict[str, Any]], ...] = (
    ("proxy", proxy.proxy, {}),
    ("run", proxy.run, PASS_THROUGH),
    ("env", proxy.env, {}),
    ("mcp-record", mcp_record.mcp_record, PASS_THROUGH),
    ("find", agent_api.find, {}),
    ("get", agent_api.get, {}),
    ("manifest", agent_api.manifest, {}),
    ("mcp", agent_api.mcp, {}),
    ("contracts", contracts.contracts, {}),
    ("call", call.call, {}),
    ("uses", join.uses, {}),
    ("task", join.task, {}),
    ("trace", join.trace, {}),
    ("replay", replay.replay, {}),
    ("serve-replay", replay.serve_replay, {}),
    ("diff", drift.diff, {}),
    ("export", export.export, {}),
    ("browse", browse.browse, {}),
)
GROUPS: tuple[tuple[str, typer.Typer], ...] = (
    ("ledger", ledger.ledger_app),
    ("directory", directory.directory_app),
    ("token", token.token_app),
)


def build_app() -> typer.Typer:
    """The root app with every command and group of the tables above."""
    root = typer.Typer(
        name="flightlog",
        help="Record what AI agents do (the Ledger) and list what they can do (the Directory).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    for name, command, context in COMMANDS:
        root.command(name, context_settings=context or None)(command)
    for name, group in GROUPS:
        root.add_typer(group, name=name)
    return root


app = build_app()


def main() -> None:
    """Console entry point: run the app, turning known errors into one clear line."""
    try:
        app()
    except known_errors() as e:
        print(f"flightlog: {e}", file=sys.stderr)
        sys.exit(1)
