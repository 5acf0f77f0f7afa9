"""The door's checks as plain functions: each raises `Refused` naming the limit that refuses a call.

`STATUS` maps a limit to the HTTP status the door answers with. The order the dispatcher runs them
in is the order a refusal is explained in: the token (the gate, `authority.gate`), the call's shape,
the row (the gate again, with the row), commands on this machine, the arguments and contract, the
secrets' hosts, what the contract asks of flightlog's own routes (the gate, for each of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

from authority import caveats, tokens
from catalog import retired_hosts as refused
from catalog.contracts import render_upstream, validate_args
from catalog.errors import ArgumentError, CatalogError, RefusedHost
from catalog.local_rows import tool_runs_locally
from catalog.tool import Tool
from catalog.wire import build, mcp_requests
from door.callers import OWN_SECRET
from door.errors import DoorError, RouteError
from door.routes import HOST, Declared, Routes

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
    "secret_host": 403,
    "contract": 501,
    "ledger": 503,
    "local_command": 403,
}
"""The door's HTTP status per refusing limit; a token limit (tools, uses, ...) answers 403."""
NETWORK_DOORS = frozenset({"http", "mcp"})
"""Doors anyone who reaches the proxy can knock on; `cli` is the operator's own process."""


class Refused(DoorError):
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


def inner_asks(named: Any, routes: Routes) -> list[Declared]:
    """What a rendered contract asks of flightlog's own routes when the door runs it (no confused
    deputy: the caller's token must be admitted for each, as if it had asked itself): each part sent
    to flightlog.local, declared by the route that will answer it, and reading the Ledger for a
    contract that spends flightlog's own Ledger token."""
    asks: list[Declared] = []
    for part in named if isinstance(named, list) else [named]:
        if not isinstance(part, Mapping):
            continue
        if f"[{OWN_SECRET}]" in repr(part):
            asks.append(Declared("ledger"))
        requests = mcp_requests(part) if str(part.get("method", "")).upper() == "MCP" else [part]
        for request in requests:
            url = urlsplit(str(request.get("url") or ""))
            if (url.hostname or "").lower() != HOST:
                continue
            route = routes.match(url.path or "/")
            if route is None:
                continue
            method = str(request.get("method", "GET")).upper()
            try:
                body = build(request).content
                query = parse_qs(url.query, keep_blank_values=True)
                asks.append(route.declared(method, url.path, query, {}, body))
            except (RouteError, CatalogError) as e:
                raise Refused("contract", f"the contract's call to {url.path} cannot be judged: {e}") from e
    return asks


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


def operator_token(root_key: bytes, at: datetime, seconds: float) -> str:
    """A short-lived token of the operator's full authority, for the door's calls to its own routes
    made for the operator's own door (a `flightlog call` of the DISPATCH row)."""
    expires = caveats.format_instant(at + timedelta(seconds=seconds))
    return tokens.mint(root_key, [f"expires < {expires}"]).encode()
