"""`flightlog uses`, `task` and `trace`: the join of the Ledger and the Directory.

`uses` and `task` list events (oldest first); `trace` follows one event to its tool's contract and
checks the recorded request against it (`catalog.join`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flightlog.commands.directory import open_from_settings
from flightlog.commands.options import DirectoryOpt, JsonOpt, LedgerOpt
from flightlog.settings import load_settings
from formats.terminal_text import json_text, shown
from storage.kinds import MCP_TOOL_CALL, MCP_TOOL_RESULT

if TYPE_CHECKING:
    from catalog.tool import Tool
    from storage.ledger import Ledger


def uses(
    tool: Annotated[str, typer.Argument(help="A tool row's name.")],
    directory: DirectoryOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every Ledger event that used a tool, oldest first; for an MCP row, every recorded MCP call of
    it too (stdio or through the proxy), with its result, flagged when its arguments do not fit."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog import join

    opened = load_settings().open_existing_ledger(ledger)
    events = join.tool_uses(opened.engine, tool)
    row = mcp_row(tool, directory, ledger)
    if row is None:
        _events(events, as_json)
        return
    others = [e for e in events if not str(e["kind"]).startswith("mcp.")]  # another server's same name
    _events(sorted([*others, *mcp_uses(opened, row)], key=lambda e: str(e["at"])), as_json)


def task(
    name: Annotated[str, typer.Argument(help="A task name.")],
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Everything done under a task, oldest first."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog import join

    _events(join.task_events(load_settings().open_existing_ledger(ledger).engine, name), as_json)


def trace(
    event_id: Annotated[str, typer.Argument(help="A Ledger event id.")],
    directory: DirectoryOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """From an event to its tool's contract, checking the recorded request against it."""
    # deferred: mitmproxy/httpx, the Directory (SQLAlchemy) load slowly; other commands start without them
    from authority.targets import version_in
    from catalog import join
    from catalog.contracts import render_upstream
    from door.assembly import find_in

    settings = load_settings()
    opened = settings.open_existing_ledger(ledger)
    stored = list(opened.events([event_id]))
    if stored and stored[0].kind in (MCP_TOOL_CALL, MCP_TOOL_RESULT):
        _trace_mcp(opened, stored[0].to_json(), directory, ledger, as_json)
        return
    rows = open_from_settings(directory, ledger)
    found = join.trace(
        opened.engine, opened.payload, find_in(rows), render_upstream, event_id, version_in(rows)
    )
    if as_json:
        typer.echo(json_text(found.as_dict(), sort_keys=False))
    else:
        typer.echo(shown(f"{event_id}: action {found.event['action_id']}, tool {found.tool or '-'}"))
        if found.row_hash:
            typer.echo(shown(f"  compared with the row as the call ran it (version {found.row_hash})"))
        for c in found.checks:
            said = "matches the contract" if c.matches else "MISMATCH: " + c.differs
            typer.echo(shown(f"  {c.event_id}: {said}"))
        if found.note:
            typer.echo(shown(f"  {found.note}"))
    if found.mismatch:
        raise typer.Exit(1)


def _trace_mcp(
    opened: Ledger, event: dict[str, Any], directory: Path | None, ledger: str | None, as_json: bool
) -> None:
    """From a recorded MCP call (or its result) to its row, checking the call's arguments against it."""
    # deferred: the Directory and the Ledger (SQLAlchemy) load slowly; other commands start without them
    from catalog.mcp_join import CALL, argument_mismatch, arguments_of, row_for_call
    from readback.mcp_bytes import message_bytes, session_servers
    from storage.mcp_lookups import sharing_call

    call = event
    if event["kind"] != CALL:  # a result: its call shares the action (stdio) or the parent (HTTP)
        over_http = bool(event.get("parent"))
        key = event["parent"] if over_http else event["action_id"]
        calls = [e for e in opened.events(sharing_call(opened.engine, key, over_http)) if e.kind == CALL]
        call = calls[0].to_json() if calls else event
    data = message_bytes(opened, call) if call["kind"] == CALL else None
    arguments = arguments_of(data) if data is not None else None
    session = str(call["event_id"]).rsplit(":", 2)[0]
    row = row_for_call(call, _all_tools(directory, ledger), session_servers(opened).get(session))
    mismatch = argument_mismatch(row, arguments) if row is not None else ""
    note = "" if row is not None else f"no MCP row of this server has the tool {call.get('tool')!r}"
    if as_json:
        out = {"event": event, "call": call["event_id"], "tool": row.name if row else None}
        typer.echo(
            json.dumps({**out, "arguments": arguments, "mismatch": mismatch, "note": note}, default=str)
        )
    else:
        typer.echo(shown(f"{event['event_id']}: call {call['event_id']}, row {row.name if row else '-'}"))
        said = "MISMATCH: " + mismatch if mismatch else "the arguments fit the row" if row else note
        typer.echo(shown(f"  {said}"))
    if mismatch:
        raise typer.Exit(1)


def _all_tools(directory: Path | None, ledger: str | None) -> list[Tool]:
    # deferred: the Directory and the Ledger (SQLAlchemy) load slowly; other commands start without them
    from catalog.document import parse
    from catalog.errors import CatalogError
    from catalog.tool import Tool

    opened = open_from_settings(directory, ledger)
    try:
        rows = opened.rows("tool")
        texts = opened.texts(rows)
    finally:
        opened.close()
    out = []
    for row in rows:
        front, body, _ = parse(texts.get(row.id, ""))
        try:
            out.append(Tool.from_frontmatter(front, body, bundle=row.bundle))
        except CatalogError:  # a row that does not read as a tool cannot be an MCP call's row
            continue
    return out


def mcp_row(name: str, directory: Path | None, ledger: str | None) -> Tool | None:
    """The row called `name` when its upstream is an MCP call (None otherwise or when unknown)."""
    # deferred: the Directory and the Ledger (SQLAlchemy) load slowly; other commands start without them
    from catalog.mcp_join import is_mcp_row
    from door.assembly import find_in

    rows = open_from_settings(directory, ledger)
    try:
        row = find_in(rows)(name)
    finally:
        rows.close()
    return row if row is not None and is_mcp_row(row) else None


def mcp_uses(opened: Ledger, row: Tool) -> list[dict[str, Any]]:
    """The recorded MCP calls of a row and their results, as event rows; calls carry `arguments`
    and `mismatch` (why the arguments do not fit the row's schema, "" when they do)."""
    # deferred: the Directory and the Ledger (SQLAlchemy) load slowly; other commands start without them
    from catalog.mcp_join import arguments_of, recorded_calls
    from readback.mcp_bytes import message_bytes, session_servers

    def read(event: dict[str, Any]) -> Any:
        data = message_bytes(opened, event)
        return arguments_of(data) if data is not None else None

    out: list[dict[str, Any]] = []
    for found in recorded_calls(opened.engine, row, read, server_names=session_servers(opened)):
        out.append({**found.call, "arguments": found.arguments, "mismatch": found.mismatch})
        if found.result is not None:
            out.append(found.result)
    return out


def _events(events: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(events, indent=2, default=str))
        return
    if not events:
        typer.echo("no events")
    for e in events:
        status = e["status"] if e.get("status") is not None else ""
        said = e.get("error") or e["url"] or ""
        if e.get("mismatch"):
            said = f"MISMATCH: {e['mismatch']}"
        elif "arguments" in e:
            said = f"{json.dumps(e['arguments'], ensure_ascii=False)[:200]}"
        typer.echo(shown(f"{e['at']}  {e['action_id']}  {e['kind']:<28} {status!s:<4} {said}"))
