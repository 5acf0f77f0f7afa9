"""`flightlog diff RECORDING_A RECORDING_B`: what changed in the agent's behaviour between two runs.

A recording is a Ledger file (a pytest plugin recording, any SQLite Ledger), a Ledger URL (all of
it), or a selection in the default (or `--ledger`) Ledger in plain words: `'session s1'`,
`'task t2'`, any Ledger question. `--fail-on` rules make it a CI gate: exit 1 when one trips.
A gate must not pass by comparing nothing: a missing Ledger file, words not understood and a
selection that matches no recorded exchange are each refused in one line (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from flightlog.commands.options import BlobsOpt, JsonOpt, LedgerOpt, worded_filter
from flightlog.errors import CommandError
from flightlog.settings import Settings, load_settings
from formats.terminal_text import shown_lines

if TYPE_CHECKING:
    from readback.behaviour import Step

RecordingArg = Annotated[
    str, typer.Argument(help="A Ledger file, a Ledger URL, or a selection in plain words ('session s1').")
]


def read_recording(spec: str, settings: Settings, ledger: str | None, blobs: str | None) -> list[Step]:
    """The steps of one recording, in recorded order."""
    # deferred: the readback modules load SQLAlchemy; `flightlog --help` starts without it
    from readback.behaviour import steps
    from readback.recorded import Selection, iter_exchanges, select_action_ids

    selection, worded = Selection(), False
    if "://" in spec:
        url, blobs_url = spec, blobs or settings.blobs_url
    elif Path(spec).is_file():
        path = Path(spec).resolve()
        url, blobs_url = f"sqlite:///{path}", path.with_suffix(".blobs").as_uri()
    elif looks_like_file(spec):
        raise CommandError(f"{spec!r}: no such Ledger file")
    else:
        url, blobs_url = ledger or settings.ledger_url, blobs or settings.blobs_url
        worded = True
    opened = settings.open_existing_ledger(url, blobs_url)
    try:
        if worded:  # read against the Ledger's values: "session a" where a session is named "a"
            from storage.questions.known_values import LedgerValues

            known = LedgerValues(opened.engine)
            selection = Selection(worded_filter(spec, f"{spec!r} is no Ledger file, URL or selection", known))
        actions = select_action_ids(opened.engine, selection)
        if not actions and worded:  # a gate that compares nothing passes whatever changed
            raise CommandError(f"{spec!r} is no Ledger file here, and no recorded exchange matches it")
        return steps(list(iter_exchanges(opened.engine, opened.events, actions)), opened.payload)
    finally:
        opened.close()


LEDGER_SUFFIXES: Final = (".db", ".sqlite", ".sqlite3")
"""Names a recording given as a word is taken to be a file by (`looks_like_file`)."""


def looks_like_file(spec: str) -> bool:
    """Whether a recording that is neither a file nor a URL was meant as one: a Ledger file's name.
    Read as words it would select by host (`run.db` reads as one). (A path-like word may be a URL
    path in a question, `/v1/chat`; what a mistyped one selects is refused below, being nothing.)"""
    return not any(c.isspace() for c in spec) and spec.lower().endswith(LEDGER_SUFFIXES)


def diff(
    recording_a: RecordingArg,
    recording_b: RecordingArg,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when this changed: requests, order, model, tools, tool-calls, mcp, status,"
            " tokens[:PCT], cost[:PCT], any (comma-separated or repeated).",
        ),
    ] = None,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Say what changed in the agent's behaviour from RECORDING_A to RECORDING_B."""
    # deferred: the readback modules load SQLAlchemy; `flightlog --help` starts without it
    from readback.drift import compare, failures, parse_fail_on

    rules = parse_fail_on(fail_on or [])
    settings = load_settings()
    drift = compare(
        read_recording(recording_a, settings, ledger, blobs),
        read_recording(recording_b, settings, ledger, blobs),
    )
    failed = failures(drift, rules)
    if as_json:
        typer.echo(json.dumps({**drift.to_json(), "failed": failed}, indent=2))
    else:
        typer.echo(shown_lines(drift.render()))
        for reason in failed:
            typer.echo(shown_lines(f"FAIL (--fail-on): {reason}"))
    if failed:
        raise typer.Exit(1)
