"""`flightlog env`, and the token a shell or a `run` child is lent: what routes programs through the
proxy and lets them reach its door.

`env` prints the same variables `run` sets for its child, and FLIGHTLOG_TOKEN minted from the
operator's policy; beside it FLIGHTLOG_SHELL_TOKEN marks that token as the shell's
(`options.SHELL_TOKEN_ENV`), so the operator's own `flightlog call` typed there stays the operator's.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from addons.ai_listeners import plan, wanted
from addons.proxy_env import Listener, export_lines, proxy_env
from flightlog import ports
from flightlog.commands.options import SHELL_TOKEN_ENV, parse_listen
from flightlog.settings import load_settings
from recording.identity import Identity

DEFAULT_LISTEN = "127.0.0.1:8080"
TOKEN_ENV = "FLIGHTLOG_TOKEN"
"""The variable a scoped token travels in (`catalog.forms.door.TOKEN_ENV`)."""


def default_listeners() -> tuple[Listener, ...]:
    """What `flightlog proxy` with no options publishes in proxy.json, for `env` with none running."""
    host, port = parse_listen(DEFAULT_LISTEN)
    apis = wanted(())
    ai = plan(apis, ports.next_to(port, len(apis)), {})
    return (Listener("regular", host, port), *(Listener(x.mode, host, x.port, x.api) for x in ai))


def lent_token(task: str | None) -> dict[str, str]:
    """FLIGHTLOG_TOKEN for a child: the one already set (never widened), else one minted from the
    operator's policy in FLIGHTLOG_HOME over the Directory (`authority.lending`)."""
    # deferred: the Directory (SQLAlchemy) loads only for the commands that lend a token
    from authority.lending import mint_policy_token
    from catalog.directory import open_directory

    if os.environ.get(TOKEN_ENV):
        return {}
    settings = load_settings()
    directory = open_directory(settings.ledger_url, settings.directory)
    try:
        return {TOKEN_ENV: mint_policy_token(settings.home, directory, task=task)}
    finally:
        directory.close()


def env(
    agent: Annotated[str | None, typer.Option(help="Agent name filed on every event.")] = None,
    session: Annotated[str | None, typer.Option(help="Session id.")] = None,
    task: Annotated[str | None, typer.Option(help="Task id.")] = None,
) -> None:
    """Print export lines that route a shell's programs through the proxy (with FLIGHTLOG_TOKEN, a
    token minted from the policy in FLIGHTLOG_HOME, as `run` lends its child).

    The proxy running (or starting) for FLIGHTLOG_HOME, as its proxy.json says; none running: what
    `flightlog proxy` uses by default (127.0.0.1:8080, OPENAI_BASE_URL on 8081, ANTHROPIC_BASE_URL on
    8082), said on stderr."""
    settings = load_settings()
    who = Identity(agent=agent, session=session, task=task)
    from flightlog.proxy_process import running_or_starting  # deferred: subprocess, only here

    state = running_or_starting(settings.home)  # one still starting is waited for, as `run` does
    if state is not None and state.forward is not None:
        values = proxy_env((state.forward.host, state.forward.port), state.ca, who, state.reverse)
    else:
        forward, *reverse = default_listeners()
        ca = settings.confdir / "mitmproxy-ca-cert.pem"
        values = proxy_env((forward.host, forward.port), ca, who, tuple(reverse))
        typer.echo(
            f"flightlog env: no proxy is running for {settings.home}; these are the ports "
            f"`flightlog proxy` listens on by default ({DEFAULT_LISTEN}, model APIs on the next two)",
            err=True,
        )
    lent = lent_token(task)
    if lent:
        values.update(lent | {SHELL_TOKEN_ENV: lent[TOKEN_ENV]})
    typer.echo(export_lines(values))
