"""`flightlog approve`: answer the requests an egress policy's `ask` rule holds.

    flightlog approve                 # list the held requests (id, time left, who, what, rule)
    flightlog approve ID              # let exactly that request through
    flightlog approve ID --refuse     # refuse it (the caller gets the 403 naming the rule)

It writes the answer into FLIGHTLOG_HOME/asks (`egress.approvals`), where the proxy holding the request
looks for it; whoever can run this with access to FLIGHTLOG_HOME is the operator.
"""

from __future__ import annotations

import getpass
import json
from typing import Annotated

import typer

from flightlog.commands.options import JsonOpt
from flightlog.settings import load_settings


def approve(
    ask_id: Annotated[
        str | None, typer.Argument(metavar="ID", help="The held request (see the list).")
    ] = None,
    refuse: Annotated[
        bool, typer.Option("--refuse", help="Refuse it instead of letting it through.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Approve (or --refuse) a request held by an `ask` rule of the egress policy; no ID: list them."""
    from dataclasses import asdict

    from egress.approvals import AskBook

    book = AskBook(load_settings().home)
    if ask_id is None:
        pending = book.pending()
        if as_json:
            typer.echo(json.dumps([asdict(p) for p in pending]))
        elif not pending:
            typer.echo("no request is waiting for an answer")
        for item in pending if not as_json else ():
            typer.echo(item.line())
        return
    answered = book.answer(ask_id, not refuse, by=_operator())
    if as_json:
        typer.echo(json.dumps({"id": answered.id, "approved": not refuse, "target": answered.target}))
    else:
        typer.echo(f"{'refused' if refuse else 'approved'} {answered.id}: {answered.target}")


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"
