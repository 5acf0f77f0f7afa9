"""`flightlog ledger verify` and `flightlog ledger checkpoint`: re-derive the chain, check its
signatures and the witnesses' checkpoints, re-hash the payloads; publish a checkpoint by hand.

Their own module beside `flightlog.commands.ledger`, which adds them to the `ledger` group.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.commands.options import BlobsOpt, JsonOpt, LedgerOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings

if TYPE_CHECKING:
    from storage.chain.verify import VerifyReport

WitnessOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--witness",
        help="A witness of checkpoints: file:///PATH, s3://BUCKET/PREFIX (Object Lock) or https://URL"
        " (repeatable).",
    ),
]


def _hex(value: str, digits: int, option: str) -> str:
    if len(value) != digits or any(c not in "0123456789abcdefABCDEF" for c in value):
        raise CommandError(f"{option} {value!r} is not {digits} hex digits (as verify prints it)")
    return value.lower()


def verify(
    sample: Annotated[float, typer.Option(help="Percent of payloads to check (random sample).")] = 100.0,
    head: Annotated[
        list[str] | None,
        typer.Option("--head", help="A head digest printed earlier: it must still be in the chain."),
    ] = None,
    witness: WitnessOpt = None,
    root_key: Annotated[
        list[str] | None,
        typer.Option(
            "--root-key",
            help="A root public key to trust (64 hex digits, as verify prints it), beside FLIGHTLOG_HOME's.",
        ),
    ] = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-derive the batch chain (forged, deleted, inserted events; removed batches), check its
    signatures against trusted root keys and every checkpoint the witnesses keep, re-hash stored
    payloads (corrupted, missing, orphaned; pruned ones under a signed record); print each
    collector's head digest to keep elsewhere and what no checkpoint covers yet."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.chain.verify import verify as run_verify

    anchors = [_hex(d, 64, "--head") for d in head or ()]
    roots = [_hex(k, 64, "--root-key") for k in root_key or ()]
    opened = load_settings().open_existing_ledger(ledger, blobs)
    columns = (TextColumn("verifying"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, transient=True, disable=as_json or not sys.stderr.isatty()) as bar:
            task = bar.add_task("verify", total=None)
            report = run_verify(
                opened,
                sample,
                lambda done, total: bar.update(task, completed=done, total=total),
                anchors=anchors,
                roots=roots,
                witnesses=witness or (),
            )
    finally:
        opened.close()
    if as_json:
        typer.echo(json.dumps(_json(report), indent=2))
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(1)


def _age(then: str) -> str:
    """How long ago a UTC time text was, in the largest whole unit."""
    seconds = (datetime.now(UTC) - datetime.fromisoformat(then).replace(tzinfo=UTC)).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def _json(report: VerifyReport) -> dict[str, Any]:
    chain = report.chain
    body: dict[str, Any] = {
        "ok": report.ok,
        "checked": report.checked,
        "bytes_checked": report.bytes_checked,
        "corrupted": report.corrupted,
        "missing": report.missing,
        "orphaned": report.orphaned,
        "unreferenced": report.unreferenced,
        "pruned": [{"sha256": p.sha256, "at": p.at, "reason": p.reason} for p in report.pruned],
        "pruned_pending": report.pruned_pending,
        "lost": report.lost,
        "dropped": report.dropped,
        "chain": {
            "ok": chain.ok,
            "batches": chain.batches,
            "events": chain.chained_events,
            "legacy_events": chain.legacy_events,
            "unkeyed": [{"collector": c, "batches": n} for c, n in chain.unkeyed],
            "sealed": [{"collector": c, "batches": n} for c, n in chain.sealed],
            "signed": [{"collector": c, "from": i, "key": k} for c, i, k in chain.signed],
            "roots": chain.roots,
            "problems": chain.problems,
            "heads": [{"collector": h.collector, "index": h.index, "digest": h.digest} for h in chain.heads],
        },
    }
    if (w := report.witness) is not None:
        body["witness"] = {
            "ok": w.ok,
            "checkpoints": w.checkpoints,
            "newest": w.newest,
            "problems": w.problems,
            "unwitnessed": [
                {
                    "collector": t.collector,
                    "from": t.first,
                    "to": t.last,
                    "events": t.events,
                    "oldest": t.oldest,
                }
                for t in w.tails
            ],
        }
    return body


def _print(report: VerifyReport) -> None:
    chain = report.chain
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
    for collector, last in chain.sealed:
        typer.echo(
            f"sealed: {collector} batches #1-#{last} were written before signatures"
            " (the root signed their seal)"
        )
    for collector, first, key in chain.signed:
        typer.echo(f"signed: {collector} from batch #{first} by ed25519:{key}")
    for root in chain.roots:
        typer.echo(f"root ed25519:{root}")
    for label, shas in (
        ("corrupted", report.corrupted),
        ("missing", report.missing),
        ("orphaned", report.orphaned),
    ):
        for sha in shas:
            typer.echo(f"{label}: {sha}")
    if report.pruned:
        typer.echo(f"pruned: {len(report.pruned)} payloads under signed prune records")
    for sha in report.pruned_pending:
        typer.echo(f"pruned, bytes still in the blob store (run `ledger erase {sha}` again): {sha}")
    if report.lost or report.dropped:
        typer.echo(
            f"not recorded: {report.lost} answered exchanges (capture.lost), "
            f"{report.dropped} captured items dropped at a full queue (capture.overflow)"
        )
    if (w := report.witness) is not None:
        for line in w.problems:
            typer.echo(line)
        newest = f", the newest of {w.newest} ({_age(w.newest)} ago)" if w.newest else ""
        typer.echo(f"witnessed: {w.checkpoints} checkpoints{newest}")
        for t in w.tails:
            typer.echo(
                f"unwitnessed: {t.collector} batches #{t.first}-#{t.last} ({t.events} events, the oldest"
                f" committed {_age(t.oldest)} ago) came after the newest checkpoint:"
                " not verified by any witness"
            )
    for h in chain.heads:
        typer.echo(f"head {h.collector} #{h.index} {h.digest}")
    typer.echo("ok" if report.ok else "NOT OK")


def checkpoint(
    witness: WitnessOpt = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
) -> None:
    """Sign a checkpoint of the Ledger (every collector's head, counts, time) with FLIGHTLOG_HOME's
    root key, publish it to each --witness, and print it (one JSON line) to keep anywhere."""
    from storage.witness.publisher import checkpoint_of, publish

    opened = load_settings().open_existing_ledger(ledger, blobs)
    try:
        made = checkpoint_of(opened)
    finally:
        opened.close()
    for place in publish(made, witness or ()):
        typer.echo(f"published to {place}", err=True)
    typer.echo(made.line())
