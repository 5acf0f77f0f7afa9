"""`flightlog directory export|check` and `directory import openapi|mcp|sheet`: the Directory in and out.

Every command takes `--directory DIR` (or FLIGHTLOG_DIRECTORY); without one the native Directory
in the Ledger's database is used. An import commits its documents with `Directory.transact(...)`,
all at once (in transactions of at most 1,000 documents), and a Directory opened on a folder writes
them through to the folder.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.commands.options import DirectoryOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings
from formats.terminal_text import shown

if TYPE_CHECKING:
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.directory import Directory
    from catalog.importers import Document

directory_app = typer.Typer(help="Import and export the Directory.", no_args_is_help=True)
import_app = typer.Typer(
    help="Import rows from an OpenAPI document, an MCP server or a sheet.", no_args_is_help=True
)
directory_app.add_typer(import_app, name="import")

MAX_CHANGES = 1000


def open_from_settings(folder: Path | None, ledger_url: str | None = None) -> Directory:
    """The Directory named by `--directory`, FLIGHTLOG_DIRECTORY, or the native one (in `--ledger`'s
    database, else the configured Ledger's)."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.directory import open_directory
    from flightlog.cores import usable_cores

    settings = load_settings()
    opened = open_directory(
        ledger_url or settings.ledger_url,
        folder or settings.directory,
        cores=usable_cores(),  # a first open compiles its sections on them (catalog.compile_jobs)
    )
    problems = opened.alias_problems
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        typer.echo(
            shown(f"flightlog: warning: {problems[0]}{more}; `flightlog directory check` lists them"),
            err=True,
        )
    return opened


@directory_app.command()
def check(directory: DirectoryOpt = None) -> None:
    """List every alias that names no row (skipped when the Directory loads); exit 1 if there is any."""
    # deferred: the catalog loads SQLAlchemy; other commands start without it
    from catalog.directory import open_directory

    settings = load_settings()
    d = open_directory(settings.ledger_url, directory or settings.directory)
    try:
        problems, rows, aliases = d.alias_problems, len(d.index), len(d.aliases)
    finally:
        d.close()
    for line in problems:
        typer.echo(shown(line))
    if problems:
        raise typer.Exit(1)
    typer.echo(f"ok: {rows} rows, {aliases} aliases, every alias names a row")


@directory_app.command()
def export(
    folder: Annotated[
        Path, typer.Argument(help="Where to write the folder form (or the sheet, with --sheet).")
    ],
    sheet: bool = typer.Option(
        False,
        "--sheet",
        help="Write one .tsv or .csv sheet in seed 000's layout (a column per way of calling).",
    ),
    directory: DirectoryOpt = None,
) -> None:
    """Write the Directory back out as a folder, or as a sheet that `directory import sheet` reads."""
    if sheet and folder.suffix.lower() not in (".tsv", ".csv"):
        raise CommandError(f"{folder}: a sheet is a .tsv or .csv file")
    d = open_from_settings(directory)
    try:
        if sheet:
            # deferred: the contracts load only for a sheet
            from catalog.importers.sheet_export import export_sheet

            text = export_sheet(d, delimiter="\t" if folder.suffix.lower() == ".tsv" else ",")
            try:
                folder.write_text(text, encoding="utf-8")
            except OSError as e:
                raise CommandError(f"cannot write {folder}: {e.strerror}") from e
            typer.echo(f"exported {len(d.rows())} rows to {folder}")
            return
        n = d.export(folder)
    finally:
        d.close()
    typer.echo(f"exported {n} documents to {folder}")


@import_app.command("openapi")
def import_openapi(
    file: Path = typer.Argument(..., help="An OpenAPI 3.x document, JSON or YAML."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="The API's base URL (default: its first server)."
    ),
    directory: DirectoryOpt = None,
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Each operation of an OpenAPI document becomes a tool row."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.importers.openapi import import_openapi as run

    _write(run(file, base_url=base_url), directory, replace, as_json, f"openapi {file.name}")


@import_app.command(
    "mcp",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def import_mcp(
    command: list[str] = typer.Argument(..., help="The server's command line; put it after `--`."),
    prefix: str = typer.Option("", "--prefix", help="Put this before every imported row's name."),
    directory: DirectoryOpt = None,
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """An MCP server's tools/list becomes rows with MCP contracts: `import mcp -- python server.py`."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.forms.recorded_mcp import RECORDED_FORM_NOTES, mcp_upstream, recorded_forms
    from catalog.importers import documents
    from catalog.importers.mcp import tools_from_mcp

    tools = tools_from_mcp(command, prefix=prefix)
    _write(documents(tools), directory, replace, as_json, f"mcp {shlex.join(command)}")
    contract = mcp_upstream(tools[0].upstream) if tools and not as_json else None
    server = (contract or {}).get("server") or {}
    for name, form in recorded_forms(server).items():  # how to run it recorded, for each client
        typer.echo(f"\n{name}: {RECORDED_FORM_NOTES[name]}\n{form.get('command') or form['code']}")


@import_app.command("sheet")
def import_sheet(
    file: Path = typer.Argument(..., help="A .tsv or .csv file whose first line names the columns."),
    directory: DirectoryOpt = None,
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Rows from a TSV/CSV sheet, read by header label; an unknown header is an error."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.importers.sheet import import_sheet as run

    _write(run(file), directory, replace, as_json, f"sheet {file.name}")


def _write(docs: list[Document], directory: Path | None, replaces: bool, as_json: bool, source: str) -> None:
    """Commit every document, or none: a row that exists with other content needs --replace."""
    opened = open_from_settings(directory)
    try:
        changes, unchanged = _changes(opened, docs, replaces)
        revision = None
        for start in range(0, len(changes), MAX_CHANGES):
            chunk = changes[start : start + MAX_CHANGES]
            revision = opened.transact(chunk, message=f"import {source}").revision
    finally:
        opened.close()
    written = [f"{c['bundle']}/{c['path']}" for c in changes]
    if as_json:
        typer.echo(json.dumps({"written": written, "unchanged": unchanged, "revision": revision}, indent=2))
        return
    for name in written:
        typer.echo(f"wrote {name}")
    for name in unchanged:
        typer.echo(f"unchanged {name}")
    at = f" (revision {revision})" if revision is not None else ""
    typer.echo(f"{len(written)} written, {len(unchanged)} unchanged{at}")


def _changes(
    opened: Directory, docs: list[Document], replaces: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.documents import sha256_text

    changes: list[dict[str, Any]] = []
    unchanged: list[str] = []
    for bundle, path, text in docs:
        current = opened.current_hash(bundle, path)
        if current == sha256_text(text):
            unchanged.append(f"{bundle}/{path}")
            continue
        if current is not None and not replaces:
            raise CommandError(f"{bundle}/{path} already exists with other content; pass --replace")
        change = {"operation": "write", "bundle": bundle, "path": path, "content": text}
        changes.append({**change, "replaces": current} if current else change)
    return changes, unchanged
