"""The options several commands share, each defined once: one name, one default, one help text.

A command declares `ledger: LedgerOpt = None` and gets the same `--ledger` as every other command.
The Ledger's filter options (the `Filter`'s fields) are many, so a command takes them as one
parameter, `filters: Given`, and `with_filters` spreads that parameter into the options on the
command line (the way datasette stacks option decorators, in Typer's terms: the signature Typer
reads is rewritten, the command body sees one mapping).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.errors import CommandError
from recording.redaction.secrets import load_secrets

if TYPE_CHECKING:
    # deferred: mitmproxy/httpx, SQLAlchemy load slowly; other commands start without them
    from readback.recorded import Selection
    from storage.filters import Filter
    from storage.ledger import Ledger
    from storage.questions.known import Known
    from storage.questions.reading import Question

LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger database URL, sqlite:///PATH or postgresql+psycopg://... "
        "(default: FLIGHTLOG_LEDGER, else FLIGHTLOG_HOME/ledger.db).",
    ),
]
BlobsOpt = Annotated[
    str | None,
    typer.Option(
        "--blobs",
        help="Blob store URL, file:// or s3:// (default: FLIGHTLOG_BLOBS, else FLIGHTLOG_HOME/blobs).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (stable, machine-readable).")]
DirectoryOpt = Annotated[
    Path | None,
    typer.Option(
        "--directory", help="A Directory folder (default: FLIGHTLOG_DIRECTORY, else the native one)."
    ),
]
WordsArg = Annotated[list[str] | None, typer.Argument(help="A question in plain words.", show_default=False)]
SecretEnvOpt = Annotated[
    list[str] | None,
    typer.Option("--secret-env", help="An environment variable holding a secret (repeatable)."),
]
ActionOpt = Annotated[list[str] | None, typer.Option("--action", help="Only this action (repeatable).")]

SHELL_TOKEN_ENV = "FLIGHTLOG_SHELL_TOKEN"
"""The token `flightlog env` lent a shell, beside FLIGHTLOG_TOKEN: for the programs it starts to reach
the door over the proxy (a network door needs a token). flightlog's own commands typed in that shell
are the operator's, as `ledger` and `token mint` there already are, so `call` does not take on the
shell's token (`flightlog.commands.call`); `run` drops the mark for its child, an agent whose token
holds."""

_Opt = typer.Option
FILTER_OPTIONS: dict[str, Any] = {
    "kind": Annotated[str | None, _Opt("--kind", help="Event kind, e.g. http.request.")],
    "direction": Annotated[str | None, _Opt("--direction", help="in (came to the system) or out (it made).")],
    "tool": Annotated[str | None, _Opt("--tool", help="Directory tool name.")],
    "session": Annotated[str | None, _Opt("--session", help="Session id.")],
    "task": Annotated[str | None, _Opt("--task", help="Task id.")],
    "turn": Annotated[str | None, _Opt("--turn", help="Turn within a session.")],
    "agent": Annotated[str | None, _Opt("--agent", help="Agent name.")],
    "model": Annotated[str | None, _Opt("--model", help="Model name.")],
    "status": Annotated[str | None, _Opt("--status", help="A code (404), a class (4xx), errors or ok.")],
    "host": Annotated[str | None, _Opt("--host", help="Host name, e.g. api.openai.com.")],
    "method": Annotated[str | None, _Opt("--method", help="HTTP method.")],
    "since": Annotated[
        str | None, _Opt("--since", help="From this time, inclusive: ISO 8601 (UTC) or today, yesterday, ...")
    ],
    "until": Annotated[
        str | None,
        _Opt("--until", help="Before this time: ISO 8601 (UTC) or words (yesterday, 2 hours ago)."),
    ],
    "url": Annotated[list[str] | None, _Opt("--url", help="A word the URL contains (repeatable).")],
}


Given = Mapping[str, Any]
"""Spread options as the command received them: option name -> value (None or empty: not given)."""
NONE_GIVEN: Given = MappingProxyType({})
"""The default of a spread parameter; the decorator always passes the real values."""


Command = Callable[..., None]


def spread_options(param: str, options: Mapping[str, Any]) -> Callable[[Command], Command]:
    """A decorator spreading the command's `param: Given` parameter into `options` (name -> annotated
    type), in its place: Typer reads the returned function's signature, the command gets one mapping.

    This is how options that several commands take are written once (the way datasette stacks click
    option decorators); their order in `--help` is the parameter's position.
    """

    def decorate(command: Command) -> Command:
        hints = typing.get_type_hints(command, include_extras=True)
        params: list[inspect.Parameter] = []
        for p in inspect.signature(command).parameters.values():
            if p.name == param:
                params += [
                    inspect.Parameter(n, p.kind, default=None, annotation=t) for n, t in options.items()
                ]
            else:
                params.append(p.replace(annotation=hints[p.name]))

        @functools.wraps(command)
        def spread(**given: Any) -> None:
            command(**{param: {name: given.pop(name) for name in options}}, **given)

        spread.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        spread.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        return spread

    return decorate


with_filters = spread_options("filters", FILTER_OPTIONS)
"""The Ledger's filter options, for a command with a `filters: Given` parameter."""


def filter_from_options(
    words: list[str] | None, filters: Given, known: Known | None = None
) -> tuple[Filter, Question | None]:
    """(Filter, Question or None) from plain words and filter options; a field given twice must agree.
    `known`: the Ledger's values, where the caller has the Ledger open (`storage.questions.reading`)."""
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.filters import Filter, iso
    from storage.questions.reading import ask
    from storage.questions.times import time_bound

    question = ask(" ".join(words), known=known) if words else None
    data = {name: value for name, value in filters.items() if value not in (None, [], ())}
    for name in ("since", "until"):
        if name in data:  # the words a question reads: `--since yesterday` as "since yesterday"
            data[name] = iso(time_bound(f"--{name}", data[name]))
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


def worded_filter(words: str, refused: str, known: Known | None = None) -> Filter:
    """The filter plain words name; words not understood are one line beginning with `refused`
    (a recording that reads as nothing would select every exchange)."""
    from storage.errors import StorageError  # deferred with the rest of the Ledger's code

    try:
        flt, _ = filter_from_options(words.split(), NONE_GIVEN, known)
    except StorageError as e:
        raise CommandError(f"{refused}: {e}") from e
    return flt


def parse_listen(listen: str) -> tuple[str, int]:
    """`--listen HOST:PORT` (or `[v6]:PORT`, or `:PORT`) as a pair; a bad value is a one-line error."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise CommandError(f"--listen wants HOST:PORT, not {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def secrets_from(path: Path | None, env_names: list[str] | None) -> dict[str, str]:
    """The secret values named by `--secrets FILE` and `--secret-env NAME`s (none given: none)."""
    if path is None and not env_names:
        return {}

    return load_secrets(path, env_names or ())


def selection_from(
    words: list[str] | None, action: list[str] | None, filters: Given, ledger: Ledger
) -> Selection:
    """The exchanges to read back from `ledger`: the filter from plain words (read against its
    values, as `ask` reads them) and options, narrowed to `--action`s."""
    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from readback.recorded import Selection
    from storage.questions.known_values import LedgerValues

    flt, question = filter_from_options(words, filters, LedgerValues(ledger.engine) if words else None)
    if question is not None:
        typer.echo(question.explain(), err=True)
    return Selection(flt, tuple(action or ()))
