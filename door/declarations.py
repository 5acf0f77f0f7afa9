"""Each of flightlog.local's routes, declared: its door, the verbs it may ask and how a request names
its target (`door.routes.Route`). The proxy's routes (`addons.local_routes`) and the door's
in-process transport (`door.local_transport`) are built from these, so both ask the same.

| route                | door | verbs                                                       |
|----------------------|------|-------------------------------------------------------------|
| `/api/ledger/...`    | http | `ledger`                                                    |
| `/api/join/...`      | http | `ledger`                                                    |
| `/api/dispatch`      | http | `call` (judged by the door itself); `ledger` for its joins  |
| `/api/graphql`       | http | `call` (judged by the door itself)                          |
| `/api/directory/...` | http | `read`; `write` for write, delete, transact, restore        |
| `/api/mcp`           | mcp  | `read`; `write` for its write verbs; `call` (by the door)   |

A `write` acts on every row it changes, each as it is and as it would be (`authority.targets`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from door.routes import Declared, Handler, Headers, Query, Route
from formats.jsonrpc import tool_calls

if TYPE_CHECKING:
    from catalog.directory import Directory

JOINS: Final = ("uses", "trace", "task", "token")
CHANGES: Final = ("write", "delete", "transact", "restore")
"""The Directory's verbs that change rows (`authority.targets.VERBS`)."""

Rows = Callable[[], "Directory"]


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        return None


def _change(directory: Rows, verb: str, arguments: Any) -> Declared:
    """A change to the Directory, with the rows it acts on as they are now."""
    from authority.targets import UNREADABLE, rows_of_request  # deferred: first request

    if not isinstance(arguments, Mapping):
        return Declared("write", (UNREADABLE,))
    return Declared("write", rows_of_request(directory(), verb, arguments))


def ledger_route(handler: Handler, prefix: str = "/api/ledger/") -> Route:
    """The Ledger's read routes (and `/api/join/`): reading the Ledger."""
    return Route(prefix, "http", frozenset({"ledger"}), lambda *_: Declared("ledger"), handler)


def dispatch_route(handler: Handler) -> Route:
    """`/api/dispatch`: a call, which the door judges itself; the joins under it read the Ledger."""

    def declare(method: str, path: str, query: Query, headers: Headers, body: bytes) -> Declared:
        if path.rstrip("/") == "/api/dispatch":
            return Declared("call", handler_judges=True)
        return Declared("ledger")

    return Route("/api/dispatch", "http", frozenset({"call", "ledger"}), declare, handler)


def graphql_route(handler: Handler) -> Route:
    """`/api/graphql`: the door's one GraphQL operation, a call the door judges itself."""
    return Route(
        "/api/graphql", "http", frozenset({"call"}), lambda *_: Declared("call", handler_judges=True), handler
    )


def directory_route(handler: Handler, directory: Rows) -> Route:
    """`/api/directory/`: reads need no right; the changing verbs (and any other method) write."""

    def declare(method: str, path: str, query: Query, headers: Headers, body: bytes) -> Declared:
        verb = path.removeprefix("/api/directory").strip("/").partition("/")[0] or "manifest"
        if verb in CHANGES or method.upper() not in ("GET", "HEAD"):
            return _change(directory, verb, _json(body))
        return Declared("read")

    return Route("/api/directory/", "http", frozenset({"read", "write"}), declare, handler)


UNREADABLE_CALL: Final = "(unreadable)"
"""The tool `mcp_message` names for a message that may be a `tools/call` but cannot be read for
certain (a duplicate key, JSON that does not parse): declared as a change of nothing a token names."""


def mcp_message(body: bytes) -> tuple[str | None, Any]:
    """(the tool a `tools/call` message names, its arguments), (None, None) for anything else, and
    (`UNREADABLE_CALL`, the reason) for what cannot be read for certain: the one reader of calls,
    `formats.jsonrpc.tool_calls`, the egress policy's too."""
    found = tool_calls(body)
    if found.unreadable is not None:
        return UNREADABLE_CALL, found.unreadable
    if len(found.calls) != 1 or found.batch:
        return None, None
    return found.calls[0].name, found.calls[0].arguments


def mcp_route(handler: Handler, directory: Rows) -> Route:
    """`/api/mcp`: the agent API over MCP; its write verbs change rows, `call` runs one."""

    def declare(method: str, path: str, query: Query, headers: Headers, body: bytes) -> Declared:
        tool, arguments = mcp_message(body)
        if tool == UNREADABLE_CALL:
            from authority.targets import UNREADABLE  # deferred: first request

            return Declared("write", (UNREADABLE,))
        if tool == "call":
            return Declared("call", handler_judges=True)
        if tool in CHANGES:
            return _change(directory, tool, arguments)
        return Declared("read")

    return Route("/api/mcp", "mcp", frozenset({"read", "write", "call"}), declare, handler)
