"""The door's checks as plain functions: each raises `Refused` naming the limit that refuses a call.

`STATUS` maps a limit to the HTTP status the door answers with. The order the dispatcher runs them
in is the order a refusal is explained in: the call's shape, the token, commands on this machine,
the arguments and contract, the rights the contract spends.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from addons.door.authority import rights_for
from catalog import caveats, refused, tokens
from catalog.authority import tool_runs_locally
from catalog.contracts import render_upstream, validate_args
from catalog.errors import ArgumentError, CatalogError, RefusedHost
from catalog.tool import Tool

STATUS = {
    "call": 400,
    "args": 400,
    "tool": 404,
    "token": 401,
    "signature": 401,
    "caveat": 401,
    "secret": 403,
    "refused_host": 403,
    "cli": 403,
    "contract": 501,
    "ledger": 503,
    "local_command": 403,
}
"""The door's HTTP status per refusing limit; a token limit (tools, uses, ...) answers 403."""
NETWORK_DOORS = frozenset({"http", "mcp"})
"""Doors anyone who reaches the proxy can knock on; `cli` is the operator's own process."""


class Refused(Exception):
    """Internal: a check refused the call; `limit` names the check."""

    def __init__(self, limit: str, message: str, status: int | None = None, **detail: Any) -> None:
        super().__init__(message)
        self.limit = limit
        self.status = status
        self.detail = detail


def read_call(call: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str) or not call["tool"]:
        raise Refused("call", 'a call is {"tool": NAME, "args": {...}}')
    args = call.get("args", {})
    if not isinstance(args, dict):
        raise Refused("call", '"args" must be a JSON object')
    if extra := sorted(set(call) - {"tool", "args"}):
        raise Refused("call", f"unknown key {extra[0]!r} in the call")
    return call["tool"], args


def check_local(tool: Tool, door: str, limits: caveats.Limits | None, local_commands: bool) -> None:
    """A row that runs a command or code here, at a network door: only when the operator enabled
    local commands, and only with a token that names the tool."""
    if door not in NETWORK_DOORS or not tool_runs_locally(tool):
        return
    if not local_commands:
        raise Refused(
            "local_command",
            f"the tool {tool.name!r} runs a command on this machine; the proxy runs such rows only "
            "when started with --allow-local-commands",
        )
    if limits is None or not limits.names_tool(tool.name):
        raise Refused(
            "local_command", f"the tool {tool.name!r} runs a command: only a token naming it may call it"
        )


def check_rights(named: Any, limits: caveats.Limits | None) -> None:
    """No confused deputy: the caller holds every right the contract spends in flightlog's name."""
    if limits is None:
        return
    missing = sorted(r for r in rights_for(named) if not limits.grants_right(r))
    if missing:
        raise Refused(
            "grants",
            f"this tool calls flightlog's own routes, which need a token granting {', '.join(missing)}",
        )


def prepare(tool: Tool, args: dict[str, Any], refused_hosts: refused.RefusedHosts | Sequence[str]) -> Any:
    """Validate, render (secrets as names) and check a call's upstream request."""
    try:
        validate_args(tool, args)
    except ArgumentError as e:
        raise Refused("args", str(e), argument=e.argument) from e
    if tool.upstream is None:
        raise Refused("contract", f"the tool {tool.name!r} has no upstream contract to run")
    try:
        refused.check(args, refused_hosts, "the call's arguments")
        named = render_upstream(tool, args, refused=refused_hosts)
    except RefusedHost as e:
        raise Refused("refused_host", str(e), host=e.host) from e
    except CatalogError as e:
        raise Refused("contract", str(e)) from e
    for part in named if isinstance(named, list) else [named]:
        method = str(part.get("method", "")).upper()
        if method == "CLI" and not tool.cli_opt_in:
            raise Refused("cli", f"the tool {tool.name!r} runs a command and has not opted in (cli: true)")
        if method == "CODE":
            raise Refused("contract", "a CODE contract is for people to paste; the door does not run it")
        if method == "MCP" and "url" not in (part.get("server") or {}):
            raise Refused("contract", "the door runs MCP over HTTP only (this server is a command)")
    return named


def verify_token(
    text: str | None, door: str, root_key: bytes, open_mode: bool
) -> tuple[caveats.Limits | None, str | None]:
    """The limits and identifier of a call's token (verified, no database). No token: refused at a
    network door unless the proxy runs open; the operator's own door (cli) may go without."""
    if not text:
        if door in NETWORK_DOORS and not open_mode:
            raise Refused("token", "this door needs a scoped token (Authorization: Bearer flt_...)")
        return None, None
    try:
        token = tokens.decode(text)
    except tokens.TokenError as e:
        raise Refused("token", str(e)) from e
    try:
        return tokens.verify(token, root_key), token.identifier
    except tokens.TokenRefused as e:
        raise Refused(e.limit, str(e)) from e


def operator_token(root_key: bytes, at: datetime, seconds: float) -> str:
    """A short-lived token of the operator's full authority, for the door's calls to its own routes
    made for the operator's own door (a `flightlog call` of the DISPATCH row)."""
    expires = caveats.format_instant(at + timedelta(seconds=seconds))
    return tokens.mint(root_key, [f"expires < {expires}"]).encode()
