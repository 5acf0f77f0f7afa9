"""`flightlog mcp-record [identity options] -- COMMAND ...`: a stdio MCP server, relayed and recorded.

Put it in front of the server's command in a client's MCP configuration (`flightlog contracts` and
`flightlog directory import mcp` print that configuration). Our stdout is the MCP channel: nothing
but the server's own bytes is ever written there; flightlog's own lines go to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flightlog.commands.options import BlobsOpt, LedgerOpt, SecretEnvOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings


def mcp_record(
    ctx: typer.Context,
    agent: Annotated[str | None, typer.Option(help="Agent name filed on every event.")] = None,
    session: Annotated[str | None, typer.Option(help="Session id filed on every event.")] = None,
    task: Annotated[str | None, typer.Option(help="Task id.")] = None,
    turn: Annotated[str | None, typer.Option(help="Turn id.")] = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    secrets: Annotated[str | None, typer.Option(help="File of NAME=value secrets to redact.")] = None,
    secret_env: SecretEnvOpt = None,
    drain_wait: Annotated[
        float, typer.Option(help="Seconds to wait at the end for the Ledger to commit (it goes on after).")
    ] = 1.5,
) -> None:
    """Run a stdio MCP server, relaying its bytes unchanged and recording every message.

    flightlog mcp-record [--agent A] -- COMMAND ARGS... ; the exit code is the server's.
    """
    # deferred: the recording pipeline (and its redaction tables) loads only for this command
    from recording.events import Processing
    from recording.identity import Identity
    from recording.mcp_stdio import RecordOptions, record
    from recording.redact import Redactor
    from recording.secrets import load_secrets

    command = list(ctx.args)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CommandError("mcp-record needs the server's command: flightlog mcp-record -- COMMAND ...")
    settings = load_settings()
    found = load_secrets(Path(secrets).expanduser() if secrets else None, list(secret_env or ()))
    opts = RecordOptions(
        command=command,
        ledger_url=ledger or settings.ledger_url,
        blobs_url=blobs or settings.blobs_url,
        processing=Processing(redactor=Redactor(found)),
        identity=Identity(agent=agent, session=session, task=task, turn=turn),
        drain_wait=drain_wait,
    )
    try:
        code = record(opts)
    except FileNotFoundError as e:
        raise CommandError(f"command not found: {command[0]}") from e
    except PermissionError as e:
        raise CommandError(f"cannot run {command[0]}: permission denied") from e
    raise typer.Exit(code)
