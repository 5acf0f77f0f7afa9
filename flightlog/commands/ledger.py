"""`flightlog ledger ...`: read events, actions and payloads, and verify what is stored."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from flightlog.errors import CommandError
from flightlog.settings import load_settings

ledger_app = typer.Typer(help="Read and verify the Ledger.", no_args_is_help=True)

LedgerOpt = Annotated[str | None, typer.Option("--ledger", help="Ledger database URL (FLIGHTLOG_LEDGER).")]
BlobsOpt = Annotated[str | None, typer.Option("--blobs", help="Blob store URL (FLIGHTLOG_BLOBS).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


def register(app: typer.Typer) -> None:
    """Add the `ledger` group to the root app."""
    app.add_typer(ledger_app, name="ledger")


def _print_event(event: dict[str, Any]) -> None:
    head = event.get("head")
    typer.echo(f"{event['event_id']}  {event['kind']}  {event['direction']}  {event['at']}")
    for name in ("action_id", "method", "url", "status", "tool", "session", "task", "turn", "agent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {event[name]}")
    for name in ("model", "tokens_in", "tokens_out", "cost_usd", "error", "parent"):
        if event.get(name) is not None:
            typer.echo(f"  {name}: {event[name]}")
    payload = event["payload_state"]
    if event.get("payload_sha256"):
        kind = "text" if event.get("payload_text") else "binary"
        payload += f" {event['payload_sha256']} ({event['payload_size']} bytes, {kind})"
    typer.echo(f"  payload: {payload}")
    if event.get("redacted"):
        typer.echo(f"  redacted: {', '.join(event['redacted'])}")
    if head:
        typer.echo("  head:")
        for line in head.split("\r\n"):
            typer.echo(f"    {line}")


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

    from storage.verify import verify as run_verify

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
            "chain": {
                "ok": chain.ok,
                "batches": chain.batches,
                "events": chain.chained_events,
                "legacy_events": chain.legacy_events,
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
        for label, shas in (
            ("corrupted", report.corrupted),
            ("missing", report.missing),
            ("orphaned", report.orphaned),
        ):
            for sha in shas:
                typer.echo(f"{label}: {sha}")
        for h in chain.heads:
            typer.echo(f"head {h.collector} #{h.index} {h.digest}")
        typer.echo("ok" if report.ok else "NOT OK")
    if not report.ok:
        raise typer.Exit(1)
