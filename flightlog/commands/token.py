"""`flightlog token mint|attenuate|inspect`: scoped tokens.

Tokens are minted from the root key in FLIGHTLOG_HOME; `attenuate` and `inspect` need no key.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from flightlog.commands.options import NONE_GIVEN, Given, JsonOpt, spread_options
from flightlog.errors import CommandError
from flightlog.settings import load_settings
from formats import durations

# TOKENS_DEFERRED: authority.tokens and authority.caveats (hmac, hashlib, base64) are imported inside the
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
ForOpt = Annotated[
    str | None, typer.Option("--for", help="The agent the token is lent to (requests must name it).")
]
FoldersOpt = Annotated[
    list[str] | None,
    typer.Option("--folder", help="Allow only rows inside this Directory folder, e.g. tool/public."),
]
CaveatOpt = Annotated[list[str] | None, typer.Option("--caveat", help="A caveat as text, e.g. 'uses <= 3'.")]
GrantOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--grant",
        help="A right the token holds: call (run calls; the default), ledger (read the Ledger), "
        "write (change the Directory); repeat for more.",
    ),
]
with_limits = spread_options(
    "limits",
    {
        "tool": ToolsOpt,
        "door": DoorsOpt,
        "uses": UsesOpt,
        "expires": ExpiresOpt,
        "task": TaskOpt,
        "bundle": BundlesOpt,
        "agent": ForOpt,
        "folder": FoldersOpt,
        "caveat": CaveatOpt,
    },
)
"""The limits a token is minted or narrowed with, for a command with a `limits: Given` parameter."""


def expiry(text: str, now: datetime | None = None) -> str:
    """`30m`/`1h`/`7d` from now, or an ISO instant, as the caveat's instant text."""
    from authority.caveats import CaveatError, format_instant, parse_instant  # deferred: see TOKENS_DEFERRED

    now = now or datetime.now(UTC)
    if (seconds := durations.seconds(text)) is not None:
        return format_instant(now + timedelta(seconds=seconds))
    try:
        return format_instant(parse_instant(text))
    except CaveatError as e:
        raise CommandError(
            f"--expires {text!r}: use a duration like 1h or 7d, or an ISO instant with a zone"
        ) from e


def caveats_from(
    tool: list[str] | None = None,
    door: list[str] | None = None,
    uses: int | None = None,
    expires: str | None = None,
    task: str | None = None,
    bundle: list[str] | None = None,
    agent: str | None = None,
    folder: list[str] | None = None,
    caveat: list[str] | None = None,
) -> list[str]:
    """The caveats the options ask for, in a fixed order."""
    out = []
    if tool:
        out.append(f"tools = {','.join(tool)}")
    if door:
        out.append(f"doors = {','.join(door)}")
    if uses is not None:
        out.append(f"uses <= {uses}")
    if expires:
        out.append(f"expires < {expiry(expires)}")
    if task:
        out.append(f"task = {task}")
    if bundle:
        out.append(f"bundles = {','.join(bundle)}")
    if agent:
        out.append(f"for = {agent}")
    if folder:
        out.append(f"folders = {','.join(folder)}")
    return out + list(caveat or [])


QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print the token alone (no description lines).")
]


def _describe(text: str, as_json: bool, made: bool = False, quiet: bool = False) -> None:
    """Print a token and its limits, as text or JSON. A token just `made` is printed alone on stdout
    when stdout is not a terminal (`tok=$(flightlog token mint ...)` captures the token, nothing
    else) and its description goes to stderr; `quiet` leaves the description out."""
    from authority import tokens  # deferred: see TOKENS_DEFERRED

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
    if quiet:
        return
    aside = made and not sys.stdout.isatty()
    typer.echo(f"  identifier: {token.identifier}  ({len(text)} characters)", err=aside)
    for c in token.parsed():
        typer.echo(f"  {c}", err=aside)
    if not token.caveats:
        typer.echo("  (no caveats: the full authority of the root key)", err=aside)


def bindings(tools: list[str]) -> tuple[list[str], list[str]]:
    """`contract = NAME:HASH` pairs for the named rows found in the Directory (so a row rewritten
    later refuses the token), and the names not found (left unbound)."""
    # deferred: the Directory (SQLAlchemy) loads only when a token binds a row's contract
    from catalog.directory import open_directory
    from catalog.errors import CatalogError
    from catalog.local_rows import contract_hash
    from door.assembly import find_in

    settings = load_settings()
    directory = open_directory(settings.ledger_url, settings.directory)
    bound, missing = [], []
    try:
        find = find_in(directory)
        for name in tools:
            try:
                row = find(name)
            except CatalogError:
                row = None
            if row is None:
                missing.append(name)
            else:
                bound.append(f"{name}:{contract_hash(row)}")
    finally:
        directory.close()
    return bound, missing


@token_app.command()
@with_limits
def mint(
    limits: Given = NONE_GIVEN,
    grant: GrantOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Mint a scoped token from the root key in FLIGHTLOG_HOME (created on first use).

    It holds only the rights named by --grant (default: call); each --tool found in the Directory
    is bound to its current contract, so a rewritten row refuses the token (limit `contract`).
    """
    from authority import tokens  # deferred: see TOKENS_DEFERRED

    wanted = caveats_from(**limits)
    tool = limits.get("tool")
    if not any(c.replace(" ", "").startswith("grants=") for c in wanted):
        wanted.insert(0, f"grants = {','.join(grant or ['call'])}")
    elif grant:
        wanted.insert(0, f"grants = {','.join(grant)}")
    if tool:
        bound, missing = bindings(tool)
        if bound and not missing:
            wanted.append(f"contract = {','.join(bound)}")
        elif missing:
            typer.echo(
                f"flightlog: no row named {', '.join(missing)} in the Directory: the token names "
                "the tool(s) but binds no contract",
                err=True,
            )
    made = tokens.mint(tokens.root_key(load_settings().home), wanted)
    _describe(made.encode(), as_json, made=True, quiet=quiet)


@token_app.command()
@with_limits
def attenuate(
    token: Annotated[str, typer.Argument(help="The token to narrow.")],
    limits: Given = NONE_GIVEN,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Narrow a token without the root key (a caveat that would not narrow it is refused)."""
    from authority import tokens  # deferred: see TOKENS_DEFERRED

    wanted = caveats_from(**limits)
    if not wanted:
        raise CommandError("attenuate needs at least one limit (--tool, --uses, --expires, --caveat, ...)")
    _describe(tokens.attenuate(tokens.decode(token), wanted).encode(), as_json, made=True, quiet=quiet)


@token_app.command()
def inspect(
    token: Annotated[str, typer.Argument(help="The token to read.")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Also check its signature with the root key.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Show a token's limits (readable by anyone); --verify checks it against the root key."""
    from authority import tokens  # deferred: see TOKENS_DEFERRED

    if verify:
        tokens.verify(tokens.decode(token), tokens.root_key(load_settings().home))
    _describe(token, as_json)
