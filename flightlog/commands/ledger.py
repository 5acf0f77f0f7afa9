"""`flightlog ledger ...`: read events, actions and payloads, ask the Ledger's questions, verify it.

`counts`, `tally`, `query` and `ask` take a question in plain words and/or the shared filter options
(the `Filter`'s fields); the options narrow what the words said, and a field given both ways must
agree. `--json` prints the same objects the read routes answer (`counts`, `tally`, `state`, `query`,
`ask`), so scripts can use either.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.commands.answer_text import ExplainOpt, print_reply
from flightlog.commands.ledger_retention import du, erase, prune_command
from flightlog.commands.ledger_verify import checkpoint, verify
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

if TYPE_CHECKING:
    from storage.filters import Filter
    from storage.questions.reading import Question
    from storage.reader import Reader

ledger_app = typer.Typer(help="Read and verify the Ledger.", no_args_is_help=True)
ledger_app.command()(verify)
ledger_app.command()(checkpoint)
ledger_app.command()(erase)
ledger_app.command("prune")(prune_command)
ledger_app.command()(du)
LimitOpt = Annotated[int, typer.Option("--limit", min=1, max=100000, help="Events at most.")]
ByOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--by",
        help="hour, session, turn, kind, agent, model, tool, task, host, status or rule (repeatable: by each"
        " combination).",
    ),
]


def read_ledger[T](ledger_url: str | None, read: Callable[[Reader], T]) -> T:
    """`read` on the Ledger opened read-only (`storage.reader`: never created nor migrated here)."""
    reader = load_settings().open_reader(ledger_url)
    try:
        return read(reader)
    finally:
        reader.close()


def read_worded[T](
    ledger_url: str | None,
    words: list[str] | None,
    filters: Given,
    read: Callable[[Reader, Filter, Question | None], T],
) -> T:
    """`read` on the Ledger opened read-only, given the filter its words and options name. The words
    are read against that Ledger's values, as `ask` reads them: "failed calls to slack" where a host
    is api.slack.com, "session a" where a session is named "a"."""
    from storage.questions.known_values import LedgerValues

    def worded(reader: Reader) -> T:
        flt, question = filter_from_options(words, filters, LedgerValues(reader) if words else None)
        return read(reader, flt, question)

    return read_ledger(ledger_url, worded)


def _with_pruned(reader: Reader, events: list[Any]) -> list[dict[str, Any]]:
    """Events as JSON, each pruned payload's "pruned on DATE (reason)" beside its address."""
    from storage.retention.pruned import pruned

    notes = pruned(reader, [e.payload_sha256 for e in events if e.payload_sha256])
    out = []
    for e in events:
        body = e.to_json()
        if (found := notes.get(e.payload_sha256 or "")) is not None:
            body["pruned"] = found.note()
        out.append(body)
    return out


def _print_event(event: dict[str, Any]) -> None:
    from storage.rows import TOKEN_DETAILS

    head = event.get("head")
    typer.echo(shown(f"{event['event_id']}  {event['kind']}  {event['direction']}  {event['at']}"))
    for name in ("action_id", "method", "url", "status", "tool", "session", "task", "turn", "agent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {shown(event[name])}")
    for name in ("model", "tokens_in", "tokens_out", *TOKEN_DETAILS, "cost_usd", "error", "parent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {shown(event[name])}")
    payload = event["payload_state"]
    if event.get("payload_sha256"):
        kind = "text" if event.get("payload_text") else "binary"
        payload += f" {event['payload_sha256']} ({event['payload_size']} bytes, {kind})"
    if event.get("pruned"):
        payload += f", {event['pruned']}"
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
    from storage.event_reads import event

    found = read_ledger(ledger, lambda r: _with_pruned(r, [e] if (e := event(r, event_id)) else []))
    if not found:
        raise CommandError(f"no event {event_id!r} in the ledger")
    if as_json:
        typer.echo(json.dumps(found[0], indent=2))
    else:
        _print_event(found[0])


@ledger_app.command()
def action(
    action_id: str, ledger: LedgerOpt = None, blobs: BlobsOpt = None, as_json: JsonOpt = False
) -> None:
    """Print every event of one action, in order."""
    from storage.event_reads import action as action_events

    events = read_ledger(ledger, lambda r: _with_pruned(r, action_events(r, action_id)))
    if not events:
        raise CommandError(f"no events for action {action_id!r}")
    if as_json:
        typer.echo(json.dumps(events, indent=2))
        return
    for event in events:
        _print_event(event)


@ledger_app.command()
def blob(sha256: str, ledger: LedgerOpt = None, blobs: BlobsOpt = None) -> None:
    """Write a payload's exact bytes to stdout (refused if they do not match their address).

    Streamed: checked whole first, then written chunk by chunk, so any size fits in bounded memory."""
    out = sys.stdout.buffer
    opened = load_settings().open_existing_ledger(ledger, blobs)
    try:
        for chunk in opened.payload_chunks(sha256):
            out.write(chunk)
        out.flush()
    finally:
        opened.close()


@ledger_app.command()
def migrate(ledger: LedgerOpt = None, blobs: BlobsOpt = None) -> None:
    """Create the Ledger, or bring an older one's schema up to date (the read commands do neither;
    `flightlog proxy` does both as it starts)."""
    settings = load_settings()
    settings.open_ledger(ledger, blobs).close()
    typer.echo(f"ledger ready: {ledger or settings.ledger_url}")


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
    from dataclasses import replace

    from storage.event_reads import counts, totals
    from storage.questions.answer import answer
    from storage.tally import tally_answer

    ranked: list[Question] = []

    def counted(
        r: Reader, flt: Filter, question: Question | None
    ) -> tuple[Filter, Question | None, list[str], Any]:
        if question is not None and question.rank is not None and not by:  # "most", "top 3": as `ask` ranks
            ranked.append(replace(question, filter=flt))
            return flt, question, [], answer(r, ranked[0], 1000)
        keys = list(dict.fromkeys(by or ([question.group_by] if question and question.group_by else [])))
        if len(keys) > 1:  # each combination, as `tally` counts them
            return flt, question, keys, tally_answer(r, flt, keys)
        return flt, question, keys, counts(r, flt, keys[0]) if keys else totals(r, flt)

    flt, question, keys, found = read_worded(ledger_url, words, filters, counted)
    if ranked:
        _print_answer(ranked[0], found, as_json, explain=False, quiet=True)
        return
    if len(keys) > 1:
        _print_tally(keys, found, as_json)
        return
    if not keys:
        summary = {"filter": flt.to_json(), **found}
        if as_json:
            _print_json(summary)
        else:
            summary |= {"cost_usd": spend(summary["cost_usd"], summary.pop("unpriced")) or "$0"}
            for key, value in summary.items():
                typer.echo(shown(f"{key:18} {value}"))
        return
    if as_json:
        _print_json({"filter": flt.to_json(), "by": keys[0], "groups": [g.to_json() for g in found]})
        return
    if question is not None:
        typer.echo(question.explain(), err=True)
    _groups_table(keys[0], found)


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
    from storage.tally import tally_answer

    if not by:
        raise CommandError("tally needs --by KEY (repeatable): hour, session, turn, kind, agent, ...")
    keys = list(dict.fromkeys(by))
    answer = read_worded(ledger_url, words, filters, lambda r, flt, _: tally_answer(r, flt, keys))
    _print_tally(keys, answer, as_json)


def _print_tally(keys: list[str], answer: dict[str, Any], as_json: bool) -> None:
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
    from storage.tally import state_answer

    answer = read_ledger(ledger_url, state_answer)
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
    explain: ExplainOpt = False,
    filters: Given = NONE_GIVEN,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Events matching a filter or a question in plain words, newest first; a question that counts,
    sums or ranks is answered as `ask` answers it (the same reading, the same answer)."""
    from dataclasses import replace

    from storage.questions.answer import answer
    from storage.questions.reading import Question

    def answered(r: Reader, flt: Filter, q: Question | None) -> tuple[Question, dict[str, Any]]:
        question = replace(q, filter=flt) if q is not None else Question("", flt)
        return question, question.to_json() if explain else answer(r, question, limit)

    question, reply = read_worded(ledger_url, words, filters, answered)
    _print_answer(question, reply, as_json, explain, quiet=True)


@ledger_app.command("ask")
def ask_command(
    words: Annotated[list[str], typer.Argument(help="A question in plain words.", show_default=False)],
    limit: LimitOpt = 50,
    explain: ExplainOpt = False,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Answer a question in plain words ("errors from agent alpha yesterday", "p95 latency by model")."""
    from storage.questions.answer import answer
    from storage.questions.known_values import LedgerValues
    from storage.questions.reading import ask

    reader = load_settings().open_reader(ledger_url)
    try:
        question = ask(" ".join(words), known=LedgerValues(reader))
        reply = question.to_json() if explain else answer(reader, question, limit)
    finally:
        reader.close()
    _print_answer(question, reply, as_json, explain)


def _print_answer(
    question: Question, reply: dict[str, Any], as_json: bool, explain: bool, quiet: bool = False
) -> None:
    """One answer as `ask` and `query` print it: the reading (on stdout, or stderr for a query of
    options only), then the view; `--explain`: the reading alone."""
    if as_json:
        _print_json(reply)
        return
    typer.echo(question.explain(), err=quiet and not explain)
    if explain:
        return
    print_reply(question.view, reply, question.group_by, question.filter.sort)
