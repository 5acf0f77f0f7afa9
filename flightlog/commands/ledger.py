"""`flightlog ledger ...`: read events, actions and payloads, ask the Ledger's questions, verify it.

`counts`, `tally`, `query` and `ask` take a question in plain words and/or the shared filter options
(the `Filter`'s fields); the options narrow what the words said, and a field given both ways must
agree. `--json` prints the same objects the read routes answer (`counts`, `tally`, `state`, `query`,
`ask`), so scripts can use either.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from flightlog.commands.options import (
    NONE_GIVEN,
    BlobsOpt,
    Given,
    JsonOpt,
    LedgerOpt,
    WordsArg,
    filter_from_options,
    with_filters,
)
from flightlog.errors import CommandError
from flightlog.settings import load_settings
from formats.terminal_text import json_text, shown
from tui.figures import spend

ledger_app = typer.Typer(help="Read and verify the Ledger.", no_args_is_help=True)
LimitOpt = Annotated[int, typer.Option("--limit", min=1, max=100000, help="Events at most.")]
ByOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--by",
        help="hour, session, turn, kind, agent, model, tool, task, host, status or rule (repeatable: by each"
        " combination).",
    ),
]


def _print_event(event: dict[str, Any]) -> None:
    head = event.get("head")
    typer.echo(shown(f"{event['event_id']}  {event['kind']}  {event['direction']}  {event['at']}"))
    for name in ("action_id", "method", "url", "status", "tool", "session", "task", "turn", "agent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {shown(event[name])}")
    for name in ("model", "tokens_in", "tokens_out", "cost_usd", "error", "parent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {shown(event[name])}")
    payload = event["payload_state"]
    if event.get("payload_sha256"):
        kind = "text" if event.get("payload_text") else "binary"
        payload += f" {event['payload_sha256']} ({event['payload_size']} bytes, {kind})"
    typer.echo(f"  payload: {payload}")
    if event.get("redacted"):
        typer.echo(f"  redacted: {shown(', '.join(event['redacted']))}")
    if head:
        typer.echo("  head:")
        for line in head.split("\r\n"):
            typer.echo(f"    {shown(line)}")


@ledger_app.command()
def row(event_id: str, ledger: LedgerOpt = None, blobs: BlobsOpt = None, as_json: JsonOpt = False) -> None:
    """Print one event whole."""
    found = load_settings().open_ledger(ledger, blobs).event(event_id)
    if found is None:
        raise CommandError(f"no event {event_id!r} in the ledger")
    if as_json:
        typer.echo(json.dumps(found.to_json(), indent=2))
    else:
        _print_event(found.to_json())


@ledger_app.command()
def action(
    action_id: str, ledger: LedgerOpt = None, blobs: BlobsOpt = None, as_json: JsonOpt = False
) -> None:
    """Print every event of one action, in order."""
    events = load_settings().open_ledger(ledger, blobs).action(action_id)
    if not events:
        raise CommandError(f"no events for action {action_id!r}")
    if as_json:
        typer.echo(json.dumps([e.to_json() for e in events], indent=2))
        return
    for event in events:
        _print_event(event.to_json())


@ledger_app.command()
def blob(sha256: str, ledger: LedgerOpt = None, blobs: BlobsOpt = None) -> None:
    """Write a payload's exact bytes to stdout (refused if they do not match their address).

    Streamed: checked whole first, then written chunk by chunk, so any size fits in bounded memory."""
    out = sys.stdout.buffer
    for chunk in load_settings().open_ledger(ledger, blobs).payload_chunks(sha256):
        out.write(chunk)
    out.flush()


@ledger_app.command()
def verify(
    sample: Annotated[float, typer.Option(help="Percent of payloads to check (random sample).")] = 100.0,
    head: Annotated[
        list[str] | None,
        typer.Option("--head", help="A head digest printed earlier: it must still be in the chain."),
    ] = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-derive the batch chain (forged, deleted, inserted events; removed batches), re-hash stored
    payloads (corrupted, missing, orphaned); print each collector's head digest to keep elsewhere."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.verify import verify as run_verify

    for digest in head or ():
        if len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise CommandError(f"--head {digest!r} is not a head digest (64 hex digits, as verify prints it)")
    opened = load_settings().open_ledger(ledger, blobs)
    columns = (TextColumn("verifying"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True, disable=as_json or not sys.stderr.isatty()) as bar:
        task = bar.add_task("verify", total=None)
        report = run_verify(
            opened,
            sample,
            lambda done, total: bar.update(task, completed=done, total=total),
            anchors=head or (),
        )
    chain = report.chain
    if as_json:
        body = {
            "ok": report.ok,
            "checked": report.checked,
            "bytes_checked": report.bytes_checked,
            "corrupted": report.corrupted,
            "missing": report.missing,
            "orphaned": report.orphaned,
            "unreferenced": report.unreferenced,
            "lost": report.lost,
            "dropped": report.dropped,
            "chain": {
                "ok": chain.ok,
                "batches": chain.batches,
                "events": chain.chained_events,
                "legacy_events": chain.legacy_events,
                "unkeyed": [{"collector": c, "batches": n} for c, n in chain.unkeyed],
                "problems": chain.problems,
                "heads": [
                    {"collector": h.collector, "index": h.index, "digest": h.digest} for h in chain.heads
                ],
            },
        }
        typer.echo(json.dumps(body, indent=2))
    else:
        typer.echo(f"checked {report.checked} payloads ({report.bytes_checked} bytes)")
        legacy = f", {chain.legacy_events} from before the chain counted" if chain.legacy_events else ""
        typer.echo(f"checked {chain.batches} chained batches ({chain.chained_events} events{legacy})")
        for line in chain.problems:
            typer.echo(line)
        for collector, last in chain.unkeyed:
            typer.echo(
                f"unkeyed: {collector} batches #1-#{last} were written before keyed chains"
                " (whoever held the database could have rewritten them; --head proves they were not)"
            )
        for label, shas in (
            ("corrupted", report.corrupted),
            ("missing", report.missing),
            ("orphaned", report.orphaned),
        ):
            for sha in shas:
                typer.echo(f"{label}: {sha}")
        if report.lost or report.dropped:
            typer.echo(
                f"not recorded: {report.lost} answered exchanges (capture.lost), "
                f"{report.dropped} captured items dropped at a full queue (capture.overflow)"
            )
        for h in chain.heads:
            typer.echo(f"head {h.collector} #{h.index} {h.digest}")
        typer.echo("ok" if report.ok else "NOT OK")
    if not report.ok:
        raise typer.Exit(1)


def _print_json(value: Any) -> None:
    typer.echo(json_text(value))


def _groups_table(by: str, groups: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(by, "events", "tokens in", "tokens out", "cost (USD)", box=None)
    for g in groups:
        cost = spend(g.cost_usd, g.unpriced)
        key = Text(shown(g.key)) if g.key is not None else "(none)"  # Text: never read as markup
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
        typer.echo(shown("  ".join(parts)))
    if not events:
        typer.echo("no events match", err=True)


@ledger_app.command("counts")
@with_filters
def counts_command(
    words: WordsArg = None,
    by: ByOpt = None,
    filters: Given = NONE_GIVEN,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counted views by hour, session, turn, kind, agent, model, tool, task, host or status (totals
    without --by; several --by count each combination, as `tally` does)."""
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.queries import counts, totals

    flt, question = filter_from_options(words, filters)
    keys = list(dict.fromkeys(by or ([question.group_by] if question and question.group_by else [])))
    if len(keys) > 1:
        _tally(flt, keys, ledger_url, blobs_url, as_json)
        return
    ledger = load_settings().open_ledger(ledger_url, blobs_url)
    try:
        if not keys:
            summary = {"filter": flt.to_json(), **totals(ledger.engine, flt)}
            if as_json:
                _print_json(summary)
            else:
                summary |= {"cost_usd": spend(summary["cost_usd"], summary.pop("unpriced")) or "$0"}
                for key, value in summary.items():
                    typer.echo(shown(f"{key:18} {value}"))
            return
        groups = counts(ledger.engine, flt, keys[0])
    finally:
        ledger.close()
    if as_json:
        _print_json({"filter": flt.to_json(), "by": keys[0], "groups": [g.to_json() for g in groups]})
        return
    if question is not None:
        typer.echo(question.explain(), err=True)
    _groups_table(keys[0], groups)


@ledger_app.command("tally")
@with_filters
def tally_command(
    words: WordsArg = None,
    by: ByOpt = None,
    filters: Given = NONE_GIVEN,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Events, tokens and cost per combination of 1 to 3 keys (--by, repeatable), largest first."""
    flt, _ = filter_from_options(words, filters)
    if not by:
        raise CommandError("tally needs --by KEY (repeatable): hour, session, turn, kind, agent, ...")
    _tally(flt, list(dict.fromkeys(by)), ledger_url, blobs_url, as_json)


def _tally(flt: Any, keys: list[str], ledger_url: str | None, blobs_url: str | None, as_json: bool) -> None:
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.tally import tally_answer

    ledger = load_settings().open_ledger(ledger_url, blobs_url)
    try:
        answer = tally_answer(ledger.engine, flt, keys)
    finally:
        ledger.close()
    if as_json:
        _print_json(answer)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(*keys, "events", "tokens in", "tokens out", "cost (USD)", box=None)
    for g in answer["groups"]:
        cost = spend(g["cost_usd"], g["unpriced"])
        cells = [Text(shown(v)) if v is not None else "(none)" for v in g["key"].values()]
        table.add_row(*cells, f"{g['events']:,}", f"{g['tokens_in']:,}", f"{g['tokens_out']:,}", cost)
    Console(soft_wrap=True).print(table)


@ledger_app.command("state")
def state_command(ledger_url: LedgerOpt = None, blobs_url: BlobsOpt = None, as_json: JsonOpt = False) -> None:
    """Where each collector stands: its position, last commit, lag, batches and drops."""
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.tally import state_answer

    ledger = load_settings().open_ledger(ledger_url, blobs_url)
    try:
        answer = state_answer(ledger.engine)
    finally:
        ledger.close()
    if as_json:
        _print_json(answer)
        return
    for c in answer["collectors"]:
        lag = "-" if c["lag_seconds"] is None else f"{c['lag_seconds']}s"
        line = (
            f"{c['collector']}  position {c['position']}  batches {c['batches']}  events {c['events_new']}"
            f"  duplicates {c['duplicates']}  last commit {c['last_commit'] or '-'}  lag {lag}"
            f"  drops {c['drops']}"
        )
        typer.echo(shown(line))
    if not answer["collectors"]:
        typer.echo("no collector has written to this ledger", err=True)


@ledger_app.command("query")
@with_filters
def query_command(
    words: WordsArg = None,
    limit: LimitOpt = 50,
    filters: Given = NONE_GIVEN,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Events matching a filter or a question in plain words, newest first."""
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.queries import event_json, select_events

    flt, question = filter_from_options(words, filters)
    ledger = load_settings().open_ledger(ledger_url, blobs_url)
    try:
        events = select_events(ledger.engine, flt, limit=limit)
    finally:
        ledger.close()
    if as_json:
        _print_json({"filter": flt.to_json(), "events": [event_json(e) for e in events]})
        return
    if question is not None:
        typer.echo(question.explain(), err=True)
    _events_table(events)


@ledger_app.command("ask")
def ask_command(
    words: Annotated[list[str], typer.Argument(help="A question in plain words.", show_default=False)],
    limit: LimitOpt = 50,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question in plain words ("errors from agent alpha yesterday", "cost by model this week")."""
    # deferred: SQLAlchemy loads slowly; other commands start without them
    from storage.answer import answer
    from storage.ask import ask
    from storage.queries import counts, select_events

    question = ask(" ".join(words))
    ledger = load_settings().open_ledger(ledger_url, blobs_url)
    try:
        reply = answer(ledger.engine, question, limit)
        if not as_json and question.view == "groups":
            assert question.group_by is not None
            groups = counts(ledger.engine, question.filter, question.group_by)
        elif not as_json and question.view == "events":
            events = select_events(ledger.engine, question.filter, limit=min(limit, question.limit or limit))
    finally:
        ledger.close()
    if as_json:
        _print_json(reply)
        return
    typer.echo(question.explain())
    if question.view == "groups":
        _groups_table(question.group_by or "", groups)
    elif question.view == "totals":
        for name, value in reply["totals"].items():
            typer.echo(f"{shown(name)}\t{shown(value)}")
    else:
        _events_table(events)
