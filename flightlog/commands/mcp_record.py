"""`flightlog mcp-record [identity options] -- COMMAND ...`: a stdio MCP server, relayed and recorded.

Put it in front of the server's command in a client's MCP configuration (`flightlog contracts` and
`flightlog directory import mcp` print that configuration). Our stdout is the MCP channel: nothing
but the server's own bytes is ever written there; flightlog's own lines go to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flightlog.commands.options import BlobsOpt, LedgerOpt, SecretEnvOpt
from flightlog.commands.sealing import PolicyOpt, policy_path
from flightlog.errors import CommandError
from flightlog.settings import load_settings
from recording.identity import Identity

if TYPE_CHECKING:
    from recording.mcp.stdio_judge import LineGate


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
    policy: PolicyOpt = None,
) -> None:
    """Run a stdio MCP server, relaying its bytes unchanged and recording every message.

    flightlog mcp-record [--agent A] -- COMMAND ARGS... ; the exit code is the server's. With an
    egress policy (--policy, or FLIGHTLOG_HOME/egress.toml), a `tools/call` it refuses is answered
    with a JSON-RPC error and never reaches the server.
    """
    # deferred: the recording pipeline (and its redaction tables) loads only for this command
    from recording.events import Processing
    from recording.mcp.stdio import RecordOptions, record
    from recording.redaction.redact import Redactor
    from recording.redaction.secrets import load_secrets

    command = list(ctx.args)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CommandError("mcp-record needs the server's command: flightlog mcp-record -- COMMAND ...")
    settings = load_settings()
    who = Identity(agent=agent, session=session, task=task, turn=turn)
    gate = _gate(policy_path(policy), settings.home, who)
    found = load_secrets(Path(secrets).expanduser() if secrets else None, list(secret_env or ()))
    opts = RecordOptions(
        command=command,
        ledger_url=ledger or settings.ledger_url,
        blobs_url=blobs or settings.blobs_url,
        processing=Processing(redactor=Redactor(found)),
        identity=who,
        drain_wait=drain_wait,
        gate=gate,
    )
    try:
        code = record(opts)
    except FileNotFoundError as e:
        raise CommandError(f"command not found: {command[0]}") from e
    except PermissionError as e:
        raise CommandError(f"cannot run {command[0]}: permission denied") from e
    raise typer.Exit(code)


def _gate(policy: str, home: Path, who: Identity) -> LineGate | None:
    """The egress policy's gate for this session, or None when there is no policy (a byte pump)."""
    from egress.approvals import AskBook
    from egress.judge import Gate
    from egress.live import LivePolicy
    from egress.policy_file import FILE_NAME
    from egress.rates import FILE as RATES_FILE
    from egress.rates import RateBook
    from egress.stdio import stdio_gate

    live = LivePolicy(Path(policy) if policy else home / FILE_NAME, home)
    if live.policy.empty and not policy:
        return None
    return stdio_gate(Gate(live, AskBook(home), rates=RateBook(home / RATES_FILE)), who)
