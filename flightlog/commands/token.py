"""`flightlog token mint|attenuate|inspect`: scoped tokens.

Tokens are minted from the root key in FLIGHTLOG_HOME; `attenuate` and `inspect` need no key.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from flightlog.commands.options import JsonOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings

# TOKENS_DEFERRED: catalog.tokens and catalog.caveats (hmac, hashlib, base64) are imported inside the
# commands, not here, so that every other `flightlog` command starts without them.
token_app = typer.Typer(help="Mint, attenuate and inspect scoped tokens.", no_args_is_help=True)

ToolsOpt = Annotated[list[str] | None, typer.Option("--tool", help="Allow this tool (repeat for more).")]
DoorsOpt = Annotated[list[str] | None, typer.Option("--door", help="Allow this door: http, mcp, cli.")]
UsesOpt = Annotated[int | None, typer.Option("--uses", min=0, help="At most this many calls.")]
ExpiresOpt = Annotated[
    str | None, typer.Option("--expires", help="Expiry: a duration (30m, 1h, 7d) or an ISO instant.")
]
TaskOpt = Annotated[str | None, typer.Option("--task", help="File every call under this task.")]
BundlesOpt = Annotated[list[str] | None, typer.Option("--bundle", help="Allow rows of this bundle.")]
ForOpt = Annotated[str | None, typer.Option("--for", help="The agent the token is lent to.")]
CaveatOpt = Annotated[list[str] | None, typer.Option("--caveat", help="A caveat as text, e.g. 'uses <= 3'.")]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def expiry(text: str, now: datetime | None = None) -> str:
    """`30m`/`1h`/`7d` from now, or an ISO instant, as the caveat's instant text."""
    from catalog.caveats import CaveatError, format_instant, parse_instant  # deferred: see TOKENS_DEFERRED

    now = now or datetime.now(UTC)
    if text[:-1].isdigit() and text[-1:] in _UNITS:
        return format_instant(now + timedelta(seconds=int(text[:-1]) * _UNITS[text[-1]]))
    try:
        return format_instant(parse_instant(text))
    except CaveatError as e:
        raise CommandError(
            f"--expires {text!r}: use a duration like 1h or 7d, or an ISO instant with a zone"
        ) from e


def caveats_from(
    tools: list[str] | None,
    doors: list[str] | None,
    uses: int | None,
    expires: str | None,
    task: str | None,
    bundles: list[str] | None,
    agent: str | None,
    extra: list[str] | None,
) -> list[str]:
    """The caveats the options ask for, in a fixed order."""
    out = []
    if tools:
        out.append(f"tools = {','.join(tools)}")
    if doors:
        out.append(f"doors = {','.join(doors)}")
    if uses is not None:
        out.append(f"uses <= {uses}")
    if expires:
        out.append(f"expires < {expiry(expires)}")
    if task:
        out.append(f"task = {task}")
    if bundles:
        out.append(f"bundles = {','.join(bundles)}")
    if agent:
        out.append(f"for = {agent}")
    return out + list(extra or [])


def _describe(text: str, as_json: bool) -> None:
    """Print a token and its limits, as text or JSON."""
    from catalog import tokens  # deferred: see TOKENS_DEFERRED

    token = tokens.decode(text)
    limits = token.limits()
    if as_json:
        view = {
            "token": text,
            "identifier": token.identifier,
            "caveats": [str(c) for c in token.parsed()],
            "limits": limits.as_dict(),
            "length": len(text),
        }
        typer.echo(json.dumps(view, indent=2))
        return
    typer.echo(text)
    typer.echo(f"  identifier: {token.identifier}  ({len(text)} characters)")
    for c in token.parsed():
        typer.echo(f"  {c}")
    if not token.caveats:
        typer.echo("  (no caveats: the full authority of the root key)")


@token_app.command()
def mint(
    tool: ToolsOpt = None,
    door: DoorsOpt = None,
    uses: UsesOpt = None,
    expires: ExpiresOpt = None,
    task: TaskOpt = None,
    bundle: BundlesOpt = None,
    agent: ForOpt = None,
    caveat: CaveatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mint a scoped token from the root key in FLIGHTLOG_HOME (created on first use)."""
    from catalog import tokens  # deferred: see TOKENS_DEFERRED

    wanted = caveats_from(tool, door, uses, expires, task, bundle, agent, caveat)
    made = tokens.mint(tokens.root_key(load_settings().home), wanted)
    _describe(made.encode(), as_json)


@token_app.command()
def attenuate(
    token: Annotated[str, typer.Argument(help="The token to narrow.")],
    tool: ToolsOpt = None,
    door: DoorsOpt = None,
    uses: UsesOpt = None,
    expires: ExpiresOpt = None,
    task: TaskOpt = None,
    bundle: BundlesOpt = None,
    agent: ForOpt = None,
    caveat: CaveatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Narrow a token without the root key (a caveat that would not narrow it is refused)."""
    from catalog import tokens  # deferred: see TOKENS_DEFERRED

    wanted = caveats_from(tool, door, uses, expires, task, bundle, agent, caveat)
    if not wanted:
        raise CommandError("attenuate needs at least one limit (--tool, --uses, --expires, --caveat, ...)")
    _describe(tokens.attenuate(tokens.decode(token), wanted).encode(), as_json)


@token_app.command()
def inspect(
    token: Annotated[str, typer.Argument(help="The token to read.")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Also check its signature with the root key.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a token's limits (readable by anyone); --verify checks it against the root key."""
    from catalog import tokens  # deferred: see TOKENS_DEFERRED

    if verify:
        tokens.verify(tokens.decode(token), tokens.root_key(load_settings().home))
    _describe(token, as_json)
