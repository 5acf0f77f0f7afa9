"""`flightlog ledger counts|query|ask` and `flightlog browse`: the Ledger's questions on the command line.

Every command takes the same filter options (the `Filter`'s fields) and, where it makes sense, a
question in plain words; the options narrow what the words said, and a field given both ways must
agree. `--json` prints the same objects the read routes answer, so scripts can use either.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from flightlog.commands.ledger import BlobsOpt, LedgerOpt, ledger_app
from flightlog.errors import CommandError

Opt = typer.Option
KindOpt = Annotated[str | None, Opt("--kind", help="Event kind, e.g. http.request.")]
DirectionOpt = Annotated[str | None, Opt("--direction", help="in (came to the system) or out (it made).")]
ToolOpt = Annotated[str | None, Opt("--tool", help="Directory tool name.")]
SessionOpt = Annotated[str | None, Opt("--session", help="Session id.")]
TaskOpt = Annotated[str | None, Opt("--task", help="Task id.")]
TurnOpt = Annotated[str | None, Opt("--turn", help="Turn within a session.")]
AgentOpt = Annotated[str | None, Opt("--agent", help="Agent name.")]
ModelOpt = Annotated[str | None, Opt("--model", help="Model name.")]
StatusOpt = Annotated[str | None, Opt("--status", help="A code (404), a class (4xx), errors or ok.")]
HostOpt = Annotated[str | None, Opt("--host", help="Host name, e.g. api.openai.com.")]
MethodOpt = Annotated[str | None, Opt("--method", help="HTTP method.")]
SinceOpt = Annotated[str | None, Opt("--since", help="From this UTC time (ISO 8601), inclusive.")]
UntilOpt = Annotated[str | None, Opt("--until", help="Before this UTC time (ISO 8601).")]
UrlOpt = Annotated[list[str] | None, Opt("--url", help="A word the URL contains (repeatable).")]
JsonOpt = Annotated[bool, Opt("--json", help="Print JSON (stable, machine-readable).")]
WordsArg = Annotated[list[str] | None, typer.Argument(help="A question in plain words.", show_default=False)]


def filter_from_options(words: list[str] | None = None, **options: Any) -> tuple[Any, Any]:
    """(Filter, Question or None) from plain words and filter options; a field given twice must agree."""
    from storage.ask import ask
    from storage.queries import Filter

    question = ask(" ".join(words)) if words else None
    data = {k: v for k, v in options.items() if v not in (None, [], ())}
    flt = Filter.from_json(data)
    if question is None:
        return flt, None
    merged = question.filter
    for name, value in data.items():
        mine = getattr(flt, name)
        theirs = getattr(merged, name)
        if theirs not in (None, ()) and theirs != mine:
            raise CommandError(f"--{name} {value} disagrees with the question's {name} {theirs}")
        merged = replace(merged, **{name: mine})
    return merged, question


def _open(ledger: str | None = None, blobs: str | None = None) -> Any:
    from flightlog.settings import load_settings
    from storage.ledger import open_ledger

    settings = load_settings()
    return open_ledger(ledger or settings.ledger_url, blobs or settings.blobs_url)


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def _groups_table(by: str, groups: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(by, "events", "tokens in", "tokens out", "cost (USD)", box=None)
    for g in groups:
        cost = f"{g.cost_usd:,.6f}" if g.cost_usd else ""
        key = g.key if g.key is not None else "(none)"
        table.add_row(key, f"{g.events:,}", f"{g.tokens_in:,}", f"{g.tokens_out:,}", cost)
    Console(soft_wrap=True).print(table)


def _events_table(events: list[Any]) -> None:
    """One line per event, columns separated by two spaces (never wrapped, so it greps well)."""
    for e in events:
        parts = [
            e.at.strftime("%Y-%m-%d %H:%M:%S"),
            e.event_id,
            e.kind,
            e.method or "-",
            "-" if e.status is None else str(e.status),
            e.url or "-",
        ]
        parts += [f"{k}={v}" for k in ("agent", "session", "model", "tool") if (v := getattr(e, k))]
        if e.cost_usd is not None:
            parts.append(f"cost=${e.cost_usd:.6f}")
        if e.error:
            parts.append(f"error={e.error!r}")
        typer.echo("  ".join(parts))
    if not events:
        typer.echo("no events match", err=True)


@ledger_app.command("counts")
def counts_command(
    words: WordsArg = None,
    by: Annotated[
        str | None, Opt("--by", help="hour, session, turn, kind, agent, model, tool or task.")
    ] = None,
    kind: KindOpt = None,
    direction: DirectionOpt = None,
    tool: ToolOpt = None,
    session: SessionOpt = None,
    task: TaskOpt = None,
    turn: TurnOpt = None,
    agent: AgentOpt = None,
    model: ModelOpt = None,
    status: StatusOpt = None,
    host: HostOpt = None,
    method: MethodOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    url: UrlOpt = None,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counted views by hour, session, turn, kind, agent, model, tool or task (totals without --by)."""
    from storage.queries import counts, totals

    flt, question = filter_from_options(
        words, kind=kind, direction=direction, tool=tool, session=session, task=task, turn=turn,
        agent=agent, model=model, status=status, host=host, method=method, since=since, until=until, url=url,
    )  # fmt: skip
    by = by or (question.group_by if question else None)
    ledger = _open(ledger_url, blobs_url)
    try:
        if by is None:
            summary = {"filter": flt.to_json(), **totals(ledger.engine, flt)}
            if as_json:
                _print_json(summary)
            else:
                for key, value in summary.items():
                    typer.echo(f"{key:18} {value}")
            return
        groups = counts(ledger.engine, flt, by)
    finally:
        ledger.close()
    if as_json:
        _print_json({"filter": flt.to_json(), "by": by, "groups": [g.to_json() for g in groups]})
        return
    if question is not None:
        typer.echo(question.explain(), err=True)
    _groups_table(by, groups)


@ledger_app.command("query")
def query_command(
    words: WordsArg = None,
    limit: Annotated[int, Opt("--limit", min=1, max=100000, help="Events at most.")] = 50,
    kind: KindOpt = None,
    direction: DirectionOpt = None,
    tool: ToolOpt = None,
    session: SessionOpt = None,
    task: TaskOpt = None,
    turn: TurnOpt = None,
    agent: AgentOpt = None,
    model: ModelOpt = None,
    status: StatusOpt = None,
    host: HostOpt = None,
    method: MethodOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    url: UrlOpt = None,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Events matching a filter or a question in plain words, newest first."""
    from storage.queries import event_json, select_events

    flt, question = filter_from_options(
        words, kind=kind, direction=direction, tool=tool, session=session, task=task, turn=turn,
        agent=agent, model=model, status=status, host=host, method=method, since=since, until=until, url=url,
    )  # fmt: skip
    ledger = _open(ledger_url, blobs_url)
    try:
        events = select_events(ledger.engine, flt, limit=limit)
    finally:
        ledger.close()
    if as_json:
        out: dict[str, Any] = {"filter": flt.to_json(), "events": [event_json(e) for e in events]}
        if question is not None:
            out["unknown"] = list(question.unknown)
        _print_json(out)
        return
    if question is not None:
        typer.echo(question.explain(), err=True)
    _events_table(events)


@ledger_app.command("ask")
def ask_command(
    words: Annotated[list[str], typer.Argument(help="A question in plain words.", show_default=False)],
    limit: Annotated[int, Opt("--limit", min=1, max=100000, help="Events at most.")] = 50,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question in plain words ("errors from agent alpha yesterday", "cost by model this week")."""
    from storage.ask import ask
    from storage.queries import counts, event_json, select_events

    question = ask(" ".join(words))
    ledger = _open(ledger_url, blobs_url)
    try:
        answer = question.to_json()
        if question.group_by:
            groups = counts(ledger.engine, question.filter, question.group_by)
            answer["groups"] = [g.to_json() for g in groups]
        else:
            events = select_events(ledger.engine, question.filter, limit=limit)
            answer["events"] = [event_json(e) for e in events]
    finally:
        ledger.close()
    if as_json:
        _print_json(answer)
        return
    typer.echo(question.explain())
    if question.group_by:
        _groups_table(question.group_by, groups)
    else:
        _events_table(events)


def replay_with_cli(action_id: str, ledger_url: str | None = None, blobs_url: str | None = None) -> str:
    """Replay through `flightlog replay ACTION_ID` in a subprocess (the browser cannot import addons).

    The subprocess reads the same Ledger as the browser: `--ledger`/`--blobs` given to `browse` are
    passed on as FLIGHTLOG_LEDGER/FLIGHTLOG_BLOBS.
    """
    env = dict(os.environ)
    if ledger_url:
        env["FLIGHTLOG_LEDGER"] = ledger_url
    if blobs_url:
        env["FLIGHTLOG_BLOBS"] = blobs_url
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "replay", action_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    text = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        from tui.errors import TuiError

        raise TuiError(text.splitlines()[-1] if text else f"replay exited with {done.returncode}")
    return text


def directory_lookup(ledger_url: str, folder: Path | None) -> Any:
    """The join from a tool name to its Directory row and contracts (a `tui.source.DirectoryLookup`).

    The Directory is opened on the first lookup, in the browser's worker thread, so it never delays
    the first screen; a name with no tool row gives None (the browser says so).
    """
    from catalog.contracts import example_args, forms
    from catalog.directory import Directory, open_directory
    from catalog.errors import UnknownRow
    from catalog.tool import Tool
    from tui.source import ToolInfo

    opened: list[Directory] = []

    def lookup(name: str) -> ToolInfo | None:
        if not opened:
            opened.append(open_directory(ledger_url, folder))
        try:
            doc = opened[0].tool(name)
        except UnknownRow:
            return None
        tool = Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle)
        row = {"id": doc.id, "name": doc.name, "type": doc.bundle, "description": doc.description}
        return ToolInfo(doc.name, row, forms(tool, example_args(tool)))

    return lookup


def browse(
    words: WordsArg = None,
    follow: Annotated[float, Opt("--follow", help="Seconds between reads of new events (0: off).")] = 1.0,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
) -> None:
    """Browse the Ledger in the terminal: newest first, following new events."""
    from flightlog.settings import load_settings
    from tui.app import BrowseApp
    from tui.source import LedgerSource

    settings = load_settings()
    ledger = _open(ledger_url, blobs_url)
    try:
        lookup = directory_lookup(ledger_url or settings.ledger_url, settings.directory)
        replayer = functools.partial(replay_with_cli, ledger_url=ledger_url, blobs_url=blobs_url)
        source = LedgerSource(ledger, directory=lookup, replayer=replayer)
        BrowseApp(source, question=" ".join(words or []), follow_seconds=follow or None).run()
    finally:
        ledger.close()


def register(app: typer.Typer) -> None:
    """Add `browse` to the root app (the `ledger` commands register on import of this module)."""
    app.command("browse")(browse)
