"""The options several commands share, each defined once: one name, one default, one help text.

A command declares `ledger: LedgerOpt = None` and gets the same `--ledger` as every other command.
The Ledger's filter options (the `Filter`'s fields) are many, so a command takes them as one
parameter, `filters: FilterOptions`, and `with_filters` spreads that parameter into the options on
the command line (the way datasette stacks option decorators, in Typer's terms: the signature Typer
reads is rewritten, the command body sees one value).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from addons.recording.secrets import load_secrets
from flightlog.errors import CommandError

if TYPE_CHECKING:
    # deferred: mitmproxy/httpx, SQLAlchemy load slowly; other commands start without them
    from addons.readback.recorded import Selection
    from storage.ask import Question
    from storage.queries import Filter

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
    "since": Annotated[str | None, _Opt("--since", help="From this UTC time (ISO 8601), inclusive.")],
    "until": Annotated[str | None, _Opt("--until", help="Before this UTC time (ISO 8601).")],
    "url": Annotated[list[str] | None, _Opt("--url", help="A word the URL contains (repeatable).")],
}


@dataclass(frozen=True)
class FilterOptions:
    """The filter options as given on the command line; None (or no URL words) means not given."""

    kind: str | None = None
    direction: str | None = None
    tool: str | None = None
    session: str | None = None
    task: str | None = None
    turn: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    host: str | None = None
    method: str | None = None
    since: str | None = None
    until: str | None = None
    url: list[str] | None = None

    def given(self) -> dict[str, Any]:
        """Only the options given, by field name (the shape `Filter.from_json` reads)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) not in (None, [], ())}


def with_filters(command: Callable[..., None]) -> Callable[..., None]:
    """Spread the command's `filters: FilterOptions` parameter into the filter options, in its place.

    Typer reads the returned function's signature; the command itself is called with one
    `FilterOptions`. The options' order in `--help` is the parameter's position.
    """
    hints = typing.get_type_hints(command, include_extras=True)
    params: list[inspect.Parameter] = []
    for p in inspect.signature(command).parameters.values():
        if p.name == "filters":
            params += [
                inspect.Parameter(name, p.kind, default=None, annotation=kind)
                for name, kind in FILTER_OPTIONS.items()
            ]
        else:
            params.append(p.replace(annotation=hints[p.name]))

    @functools.wraps(command)
    def spread(**given: Any) -> None:
        filters = FilterOptions(**{name: given.pop(name) for name in FILTER_OPTIONS})
        command(filters=filters, **given)

    spread.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    spread.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return spread


def filter_from_options(words: list[str] | None, filters: FilterOptions) -> tuple[Filter, Question | None]:
    """(Filter, Question or None) from plain words and filter options; a field given twice must agree."""
    # deferred: SQLAlchemy loads slowly; other commands start without them
    from storage.ask import ask
    from storage.queries import Filter

    question = ask(" ".join(words)) if words else None
    data = filters.given()
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


def selection_from(words: list[str] | None, action: list[str] | None, filters: FilterOptions) -> Selection:
    """The exchanges to read back: the filter from plain words and options, narrowed to `--action`s."""
    # deferred: mitmproxy/httpx load slowly; other commands start without them
    from addons.readback.recorded import Selection

    flt, question = filter_from_options(words, filters)
    if question is not None:
        typer.echo(question.explain(), err=True)
    return Selection(flt, tuple(action or ()))
