"""`flightlog ledger verify`: re-derive the batch chain and re-hash the payloads of an existing Ledger.

Its own module beside `flightlog.commands.ledger`, which adds it to the `ledger` group.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from flightlog.commands.options import BlobsOpt, JsonOpt, LedgerOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings


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
    from storage.chain.verify import verify as run_verify

    for digest in head or ():
        if len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise CommandError(f"--head {digest!r} is not a head digest (64 hex digits, as verify prints it)")
    opened = load_settings().open_existing_ledger(ledger, blobs)
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
