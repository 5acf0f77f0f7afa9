"""`flightlog call TOOL --args JSON [--dry-run]`: the dispatch door on the command line.

`call` runs the same door as the proxy's `POST /api/dispatch`, in process, and records into the
Ledger too (door `cli`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flightlog.commands.options import SHELL_TOKEN_ENV, DirectoryOpt, LedgerOpt
from flightlog.errors import CommandError
from flightlog.settings import Settings, load_settings
from formats.terminal_text import json_text, shown

if TYPE_CHECKING:
    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from door.dispatch import Dispatcher

SecretsOpt = Annotated[
    Path | None,
    typer.Option(
        "--secrets",
        help="NAME=value file of the secrets calls may use (default: FLIGHTLOG_HOME/secrets.env).",
    ),
]


def call(
    ctx: typer.Context,
    tool: Annotated[str, typer.Argument(help="The Directory row to call.")],
    args: Annotated[str, typer.Option("--args", help="The arguments as a JSON object.")] = "{}",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the exact request; send nothing.")] = False,
    token: Annotated[
        str | None, typer.Option("--token", envvar="FLIGHTLOG_TOKEN", help="A scoped token to call with.")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent the call is made for.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="The task the call is filed under.")] = None,
    directory: DirectoryOpt = None,
    ledger: LedgerOpt = None,
    secrets: SecretsOpt = None,
) -> None:
    """Call a Directory row with one canonical call (recorded in the Ledger); prints the JSON reply.

    Without --token it is the operator's own call; with one, the token's limits hold (a `for`
    token needs --agent naming its agent). The token `flightlog env` lent the shell is for the
    programs it starts, not for the operator typing there (`options.SHELL_TOKEN_ENV`)."""
    from recording.identity import Identity  # deferred: see TYPE_CHECKING above

    if token is not None and shell_token(ctx, token):
        token = None
    try:
        parsed = json.loads(args)
    except ValueError as e:
        raise CommandError(f"--args is not JSON: {e}") from e
    door = open_dispatcher(load_settings(), directory, ledger, secrets)
    who = Identity(agent=agent, task=task)
    result = door.dispatch(
        {"tool": tool, "args": parsed}, door="cli", token=token, dry_run=dry_run, identity=who
    )
    typer.echo(json_text(result.reply, sort_keys=False))
    if refused := result.reply.get("refused"):
        typer.echo(shown(f"flightlog: call refused by {refused['limit']}: {refused['message']}"), err=True)
    elif result.status >= 300:
        typer.echo(shown(f"flightlog: the upstream call failed: {result.reply.get('error')}"), err=True)
    if result.status >= 300:
        raise typer.Exit(1)


def shell_token(ctx: typer.Context, token: str) -> bool:
    """Whether `token` came from the environment and is the one `flightlog env` lent this shell."""
    lent = os.environ.get(SHELL_TOKEN_ENV)
    source = ctx.get_parameter_source("token")  # typer's own click: its enum, compared by name
    return bool(lent) and token == lent and getattr(source, "name", None) == "ENVIRONMENT"


def open_dispatcher(
    settings: Settings,
    directory: Path | None,
    ledger: str | None,
    secrets: Path | None,
    *,
    network: bool = False,
) -> Dispatcher:
    """The door as the CLI runs it, built the one way the proxy builds it (`door.assembly`):
    the same secrets by default (FLIGHTLOG_HOME/secrets.env), root key and refused hosts.
    `network`: the Directory is served to a network door (`flightlog mcp`), so it refuses rows
    that run commands."""
    # deferred: the door (httpx), the Directory (SQLAlchemy) and the token keys load slowly
    from door.assembly import open_dispatcher as assemble
    from door.assembly import open_rows
    from storage.locations import default_secrets_file

    ledger_url = ledger or settings.ledger_url
    opened = open_rows(ledger_url, directory or settings.directory, network=network)
    return assemble(
        settings.home,
        settings.open_ledger(ledger_url),
        opened,
        secrets or default_secrets_file(settings.home),
    )
