"""`flightlog export`: the Ledger's events as HAR, a mitmproxy flow file, JSON lines or OTLP traces.

Events are selected the way every Ledger question does: a question in plain words and/or the shared
filter options, read into one `storage.filters.Filter`; `--action` narrows to given actions.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Annotated

import typer

from flightlog.commands.options import (
    NONE_GIVEN,
    ActionOpt,
    BlobsOpt,
    Given,
    LedgerOpt,
    WordsArg,
    selection_from,
    with_filters,
)
from flightlog.errors import CommandError
from flightlog.settings import load_settings


@with_filters
def export(
    fmt: Annotated[str, typer.Option("--format", help="har, mitmproxy, jsonl or otlp.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="File to write (default: standard output).")
    ] = None,
    words: WordsArg = None,
    filters: Given = NONE_GIVEN,
    action: ActionOpt = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="--format otlp: the OTLP/HTTP receiver, e.g. http://127.0.0.1:4318 (or .../v1/traces)."
        ),
    ] = None,
    content: Annotated[
        bool,
        typer.Option(
            "--content",
            help="--format otlp: prompts, answers and tool arguments (as recorded, redacted) as span events.",
        ),
    ] = False,
    progress: Annotated[bool, typer.Option(help="Draw a progress bar on standard error.")] = True,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
) -> None:
    """Export events as HAR, a mitmproxy flow file, JSON lines, or OTLP traces sent to --endpoint."""
    from rich.console import Console
    from rich.progress import Progress

    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from readback.export import export as run_export
    from readback.export import export_otlp, plan

    if (fmt == "otlp") != (endpoint is not None):
        raise CommandError("--endpoint URL goes with --format otlp (and only with it)")
    if content and endpoint is None:
        raise CommandError("--content goes with --format otlp")

    opened = load_settings().open_existing_ledger(ledger, blobs)
    with ExitStack() as stack:
        stack.callback(opened.close)
        selection = selection_from(words, action, filters, opened)
        ids = plan(opened, selection, fmt)
        if endpoint is not None:
            bar = stack.enter_context(Progress(console=Console(stderr=True), disable=not progress))
            job = bar.add_task("export otlp", total=len(ids))
            count = export_otlp(opened, ids, endpoint, lambda: bar.advance(job), content=content)
            typer.echo(f"exported {len(ids)} actions as {count} otlp spans to {endpoint}", err=True)
            return
        out: IO[bytes]
        if output is None:
            if fmt == "mitmproxy" and sys.stdout.isatty():
                raise CommandError("--format mitmproxy writes a binary flow file; give -o FILE")
            out = sys.stdout.buffer
        else:
            try:
                out = stack.enter_context(output.open("wb"))
            except OSError as e:
                raise CommandError(f"cannot write {output}: {e.strerror}") from e
        bar = stack.enter_context(Progress(console=Console(stderr=True), disable=not progress))
        what = "events" if fmt == "jsonl" else "exchanges"
        job = bar.add_task(f"export {fmt}", total=len(ids))
        count = run_export(opened, fmt, ids, out, lambda: bar.advance(job))
        out.flush()
    typer.echo(f"exported {count} {what} as {fmt}" + (f" to {output}" if output else ""), err=True)
