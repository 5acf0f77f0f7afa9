"""`flightlog contracts` and `flightlog directory import ...`: call forms and importers.

Rows are read from the Directory (`--directory DIR`, FLIGHTLOG_DIRECTORY, else the native one in the
Ledger's database) with `Directory.tool(name)`; an import commits its documents with
`Directory.transact(...)`, all at once (in transactions of at most 1,000 documents), and a Directory
opened on a folder writes them through to the folder.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from flightlog.commands.directory import directory_app, open_from_settings
from flightlog.errors import CommandError

if TYPE_CHECKING:
    from catalog.directory import Directory
    from catalog.importers import Document
    from catalog.tool import Tool

import_app = typer.Typer(
    help="Import rows from an OpenAPI document, an MCP server or a sheet.", no_args_is_help=True
)

DIRECTORY_HELP = "A Directory folder (default: FLIGHTLOG_DIRECTORY, else the native one)."
MAX_CHANGES = 1000


def register(app: typer.Typer) -> None:
    """Add `contracts` to the root app and `import` to the `directory` group."""
    directory_app.add_typer(import_app, name="import")

    @app.command()
    def contracts(
        tool: str = typer.Argument(..., help="The tool row's name."),
        form: str | None = typer.Option(None, "--form", help="Only this form (e.g. curl, python, upstream)."),
        args: str | None = typer.Option(
            None,
            "--args",
            help="The call's arguments as a JSON object (default: a sample of each required one).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the forms as one JSON object."),
        directory: Path | None = typer.Option(None, "--directory", help=DIRECTORY_HELP),
        base: str = typer.Option("http://flightlog.local", "--base", help="Where flightlog's doors answer."),
        proxy: str = typer.Option("http://127.0.0.1:8080", "--proxy", help="The proxy the forms go through."),
        token: str | None = typer.Option(None, "--token", help="A scoped token for the forms to carry."),
    ) -> None:
        """Every runnable form of one tool's canonical call {"tool": NAME, "args": {...}}."""
        from catalog.contracts import FORM_NAMES, FORM_NOTES, example_args, forms
        from catalog.refused import load_refused_hosts
        from flightlog.settings import load_settings

        row = _find_tool(tool, directory)
        call_args = _parse_args(args) if args is not None else example_args(row)
        refused = load_refused_hosts(load_settings().home)
        rendered = forms(
            row, call_args, base=base, proxy=proxy, refused=refused, check_args=args is not None, token=token
        )
        if form is not None:
            if form not in rendered:
                names = ", ".join(n for n in FORM_NAMES if n in rendered)
                raise CommandError(f'{tool} has no form "{form}"; its forms are: {names}')
            rendered = {form: rendered[form]}
        if as_json:
            typer.echo(json.dumps(rendered if form is None else rendered[form], indent=2, ensure_ascii=False))
        elif form is not None:
            typer.echo(_pasteable(rendered[form]))
        else:
            for name, value in rendered.items():
                typer.echo(f"{name}: {FORM_NOTES.get(name, '')}\n{_indent(_pasteable(value))}\n")


@import_app.command("openapi")
def import_openapi(
    file: Path = typer.Argument(..., help="An OpenAPI 3.x document, JSON or YAML."),
    base_url: str | None = typer.Option(
        None, "--base-url", help="The API's base URL (default: its first server)."
    ),
    directory: Path | None = typer.Option(None, "--directory", help=DIRECTORY_HELP),
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Each operation of an OpenAPI document becomes a tool row."""
    from catalog.importers.openapi import import_openapi as run

    _write(run(file, base_url=base_url), directory, replace, as_json, f"openapi {file.name}")


@import_app.command(
    "mcp",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def import_mcp(
    command: list[str] = typer.Argument(..., help="The server's command line; put it after `--`."),
    prefix: str = typer.Option("", "--prefix", help="Put this before every imported row's name."),
    directory: Path | None = typer.Option(None, "--directory", help=DIRECTORY_HELP),
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """An MCP server's tools/list becomes rows with MCP contracts: `import mcp -- python server.py`."""
    from catalog.importers.mcp import import_mcp as run

    _write(run(command, prefix=prefix), directory, replace, as_json, f"mcp {shlex.join(command)}")


@import_app.command("sheet")
def import_sheet(
    file: Path = typer.Argument(..., help="A .tsv or .csv file whose first line names the columns."),
    directory: Path | None = typer.Option(None, "--directory", help=DIRECTORY_HELP),
    replace: bool = typer.Option(False, "--replace", help="Overwrite rows that exist with other content."),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Rows from a TSV/CSV sheet, read by header label; an unknown header is an error."""
    from catalog.importers.sheet import import_sheet as run

    _write(run(file), directory, replace, as_json, f"sheet {file.name}")


def _find_tool(name: str, directory: Path | None) -> Tool:
    from catalog.tool import Tool

    opened = open_from_settings(directory)
    try:
        doc = opened.tool(name)
    finally:
        opened.close()
    return Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle)


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise CommandError(f"--args is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise CommandError("--args must be a JSON object")
    return value


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


def _pasteable(form: Any) -> str:
    """A command as a shell line, code as code, anything else as JSON."""
    if isinstance(form, dict) and form.get("method") == "CLI":
        command = form["command"]
        return command if isinstance(command, str) else shlex.join(command)
    if isinstance(form, dict) and form.get("method") == "CODE":
        return str(form["code"]).rstrip("\n")
    return json.dumps(form, indent=2, ensure_ascii=False)


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.splitlines())
