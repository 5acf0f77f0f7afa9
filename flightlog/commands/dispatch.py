"""`flightlog call`, `flightlog token ...` and the join (`uses`, `trace`, `task`).

`call` runs the same door as the proxy's `POST /api/dispatch`, in process, and records into the
Ledger too (door `cli`). Tokens are minted from the root key in FLIGHTLOG_HOME; `attenuate` and
`inspect` need no key. The join commands read the Ledger and the Directory together.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.errors import CommandError
from flightlog.settings import Settings, load_settings

if TYPE_CHECKING:
    from addons.door.dispatch import Dispatcher

token_app = typer.Typer(help="Mint, attenuate and inspect scoped tokens.", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
DirOpt = Annotated[
    Path | None, typer.Option("--directory", help="A Directory folder (default: FLIGHTLOG_DIRECTORY).")
]
LedgerOpt = Annotated[str | None, typer.Option("--ledger", help="Ledger database URL (FLIGHTLOG_LEDGER).")]
SecretsOpt = Annotated[
    Path | None,
    typer.Option(
        "--secrets",
        help="NAME=value file of the secrets calls may use (default: FLIGHTLOG_HOME/secrets.env).",
    ),
]
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
    from catalog.caveats import CaveatError, format_instant, parse_instant

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
    from catalog import tokens

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
    from catalog import tokens

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
    from catalog import tokens

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
    from catalog import tokens

    if verify:
        tokens.verify(tokens.decode(token), tokens.root_key(load_settings().home))
    _describe(token, as_json)


def open_rows(ledger_url: str, folder: Path | None) -> Any:
    """The Directory named by --directory / FLIGHTLOG_DIRECTORY, or the native one (the operator's
    side: its commits may write rows that run commands)."""
    from addons.door.assembly import open_rows as open_directory_rows

    return open_directory_rows(ledger_url, folder, network=False)


def open_dispatcher(
    settings: Settings, directory: Path | None, ledger: str | None, secrets: Path | None
) -> Dispatcher:
    """The door as the CLI runs it, built the one way the proxy builds it (`addons.door.assembly`):
    the same secrets by default (FLIGHTLOG_HOME/secrets.env), root key and refused hosts."""
    from addons.door.assembly import open_dispatcher as assemble
    from addons.door.proxy_settings import default_secrets_file

    ledger_url = ledger or settings.ledger_url
    opened = open_rows(ledger_url, directory or settings.directory)
    return assemble(
        settings.home,
        settings.open_ledger(ledger_url),
        opened,
        secrets or default_secrets_file(settings.home),
    )


def register(app: typer.Typer) -> None:
    """Add `call`, the `token` group and the join commands to the root app."""
    app.add_typer(token_app, name="token")

    @app.command()
    def call(
        tool: Annotated[str, typer.Argument(help="The Directory row to call.")],
        args: Annotated[str, typer.Option("--args", help="The arguments as a JSON object.")] = "{}",
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Show the exact request; send nothing.")
        ] = False,
        token: Annotated[str | None, typer.Option("--token", help="A scoped token to call with.")] = None,
        directory: DirOpt = None,
        ledger: LedgerOpt = None,
        secrets: SecretsOpt = None,
    ) -> None:
        """Call a Directory row with one canonical call (recorded in the Ledger); prints the JSON reply."""
        try:
            parsed = json.loads(args)
        except ValueError as e:
            raise CommandError(f"--args is not JSON: {e}") from e
        door = open_dispatcher(load_settings(), directory, ledger, secrets)
        result = door.dispatch({"tool": tool, "args": parsed}, door="cli", token=token, dry_run=dry_run)
        typer.echo(json.dumps(result.reply, indent=2, ensure_ascii=False))
        if refused := result.reply.get("refused"):
            typer.echo(f"flightlog: call refused by {refused['limit']}: {refused['message']}", err=True)
        elif result.status >= 300:
            typer.echo(f"flightlog: the upstream call failed: {result.reply.get('error')}", err=True)
        if result.status >= 300:
            raise typer.Exit(1)

    @app.command()
    def uses(
        tool: Annotated[str, typer.Argument(help="A tool row's name.")],
        ledger: LedgerOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Every Ledger event that used a tool, oldest first."""
        from catalog import join

        _events(join.tool_uses(load_settings().open_ledger(ledger).engine, tool), as_json)

    @app.command()
    def task(
        name: Annotated[str, typer.Argument(help="A task name.")],
        ledger: LedgerOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Everything done under a task, oldest first."""
        from catalog import join

        _events(join.task_events(load_settings().open_ledger(ledger).engine, name), as_json)

    @app.command()
    def trace(
        event_id: Annotated[str, typer.Argument(help="A Ledger event id.")],
        directory: DirOpt = None,
        ledger: LedgerOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """From an event to its tool's contract, checking the recorded request against it."""
        from addons.door.assembly import find_in
        from catalog import join
        from catalog.contracts import render_upstream

        settings = load_settings()
        opened = settings.open_ledger(ledger)
        rows = open_rows(ledger or settings.ledger_url, directory or settings.directory)
        found = join.trace(opened.engine, opened.payload, find_in(rows), render_upstream, event_id)
        if as_json:
            typer.echo(json.dumps(found.as_dict(), indent=2, default=str, ensure_ascii=False))
        else:
            typer.echo(f"{event_id}: action {found.event['action_id']}, tool {found.tool or '-'}")
            for c in found.checks:
                typer.echo(
                    f"  {c.event_id}: {'matches the contract' if c.matches else 'MISMATCH: ' + c.differs}"
                )
            if found.note:
                typer.echo(f"  {found.note}")
        if found.mismatch:
            raise typer.Exit(1)


def _events(events: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(events, indent=2, default=str))
        return
    if not events:
        typer.echo("no events")
    for e in events:
        status = e["status"] if e["status"] is not None else ""
        typer.echo(
            f"{e['at']}  {e['action_id']}  {e['kind']:<28} {status!s:<4} {e.get('error') or e['url'] or ''}"
        )
