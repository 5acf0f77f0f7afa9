"""`flightlog contracts TOOL`: every runnable form of one tool's canonical call.

The tool's row is read from the Directory (`--directory DIR`, FLIGHTLOG_DIRECTORY, else the native
one in the Ledger's database) with `Directory.tool(name)`; `catalog.contracts` renders the forms.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from catalog.retired_hosts import load_refused_hosts
from flightlog.commands.directory import open_from_settings
from flightlog.commands.options import DirectoryOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings

if TYPE_CHECKING:
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.tool import Tool


def contracts(
    tool: str = typer.Argument(..., help="The tool row's name."),
    form: str | None = typer.Option(None, "--form", help="Only this form (e.g. curl, python, upstream)."),
    args: str | None = typer.Option(
        None,
        "--args",
        help="The call's arguments as a JSON object (default: a sample of each required one).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the forms as one JSON object."),
    directory: DirectoryOpt = None,
    base: str = typer.Option("http://flightlog.local", "--base", help="Where flightlog's doors answer."),
    proxy: str | None = typer.Option(
        None, "--proxy", help="The proxy the forms go through (default: the running one, from proxy.json)."
    ),
    token: str | None = typer.Option(None, "--token", help="A scoped token for the forms to carry."),
    ssh_host: str = typer.Option("localhost", "--ssh-host", help="The machine the ssh form runs the CLI on."),
) -> None:
    """Every runnable form of one tool's canonical call {"tool": NAME, "args": {...}}: 26, 29 with a
    scoped token (--token), one more with an upstream contract."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.contracts import (
        FORM_NAMES,
        FORM_NOTES,
        RECORDED_FORM_NAMES,
        RECORDED_FORM_NOTES,
        canonical_call,
        canonical_json,
        counted,
        example_args,
        forms,
    )

    row = _find_tool(tool, directory)
    call_args = _parse_args(args) if args is not None else example_args(row)
    home = load_settings().home
    refused = load_refused_hosts(home)
    rendered = forms(
        row,
        call_args,
        base=base,
        proxy=proxy or running_proxy(home),
        refused=refused,
        check_args=args is not None,
        token=token,
        home=str(home),
        ssh_host=ssh_host,
    )
    if form is not None:
        if form not in rendered:
            names = ", ".join(n for n in (*FORM_NAMES, *RECORDED_FORM_NAMES) if n in rendered)
            raise CommandError(f'{tool} has no form "{form}"; its forms are: {names}')
        rendered = {form: rendered[form]}
    if as_json:
        typer.echo(json.dumps(rendered if form is None else rendered[form], indent=2, ensure_ascii=False))
    elif form is not None:
        typer.echo(_pasteable(rendered[form]))
    else:
        total, wrapped = counted(rendered), len(rendered) - counted(rendered)
        more = f", and {wrapped} configurations of its MCP server behind mcp-record" if wrapped else ""
        call = canonical_json(canonical_call(row, call_args))
        typer.echo(f"{total} forms of the canonical call {call}{more}\n")
        for name, value in rendered.items():
            note = FORM_NOTES.get(name) or RECORDED_FORM_NOTES.get(name, "")
            typer.echo(f"{name}: {note}\n{_indent(_pasteable(value))}\n")


def running_proxy(home: Path) -> str:
    """The address of the proxy running for `home` (its `proxy.json`), else the default one."""
    # deferred: only this command reads the proxy's state
    from addons.proxy_env import read_state
    from catalog.contracts import DEFAULT_PROXY

    state = read_state(home)
    forward = state.forward if state is not None else None
    if forward is None:
        return DEFAULT_PROXY
    host = "127.0.0.1" if forward.host in ("", "0.0.0.0", "::") else forward.host
    return f"http://[{host}]:{forward.port}" if ":" in host else f"http://{host}:{forward.port}"


def _find_tool(name: str, directory: Path | None) -> Tool:
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
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
