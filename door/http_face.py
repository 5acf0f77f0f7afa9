"""The door's HTTP face under `flightlog.local`: `POST /api/dispatch` and the join routes.

`Door(dispatcher, directory_tool).handle(method, path, query, headers, body) -> (status, headers, body)`
is the plain handler the proxy's local routes call (it blocks on the upstream call: run it off the
event loop). Routes:

- `POST /api/dispatch[?dry_run=1]` with `{"tool": NAME, "args": {...}}`, or the one-line link
  `GET /api/dispatch?tool=NAME&args=JSON[&token=...]` (the contracts' `url` form); a scoped token as
  `Authorization: Bearer flt_...` or `?token=flt_...` (link-sized); who is calling from the proxy URL's
  credentials and `X-Flightlog-*` headers, as capture reads them (`recording.identity`).
  Answers `{ok, result, action_id}` or `{ok: false, refused: {limit, ...}}`.
- The same call answered as server-sent events: with `Accept: text/event-stream` the reply is one
  `reply` event (`event: reply`, `data: REPLY`), the `sse` form. Over a WebSocket (`Upgrade:
  websocket` on `/api/dispatch`): each text message a call, each reply a message
  (`door.websocket_face`). As GraphQL: `POST /api/graphql` with `catalog.graphql_call`'s one
  operation, the call as its variables, answered `{"data": {"call": REPLY}}`; any other document is
  refused naming the one it takes, and the refusal is recorded like the door's own.
- `GET /api/dispatch/uses/TOOL`: every event of a tool; `GET /api/dispatch/trace/EVENT_ID`: the
  event, its action, its contract and the check; `GET /api/dispatch/task/TASK`: everything done under
  a task (also answered under `/api/join/...` where the proxy routes that prefix here).

In the proxy `addons.local_routes` builds one `Door` on the first call (`door.assembly.
proxy_door`) from the settings it resolved in `configure()`. A call needs a scoped token (deny by
default); a browser-shaped request from another origin or with a non-JSON body is refused before
the door looks at it, and recorded as a refusal naming the limit (`door.callers`).

The proxy never records these routes: the dispatcher records its own exchange (with the token
replaced by its identifier), and the join routes are reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from authority import tokens
from authority.targets import version_in
from catalog import join
from catalog.directory import Directory
from catalog.errors import CatalogError
from catalog.graphql_call import GraphQLRefused, read_call
from catalog.tool import Tool
from door.callers import bearer, browser_refusal
from door.dispatch import Dispatcher
from door.gatekeeper import call_head
from recording.identity import from_headers, from_proxy_authorization
from storage.errors import StorageError

Answer = tuple[int, dict[str, str], bytes]
JSON = {"content-type": "application/json"}
PREFIXES = ("/api/dispatch", "/api/join/", "/api/graphql")
EVENT_STREAM = "text/event-stream"
JOINS = ("uses", "trace", "task", "token")


def _json(status: int, value: Any) -> Answer:
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
    return status, dict(JSON), body


def _error(status: int, message: str) -> Answer:
    return _json(status, {"ok": False, "error": message})


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _truthy(query: Mapping[str, list[str]], name: str) -> bool:
    return (query.get(name) or [""])[-1].lower() in ("1", "true", "yes")


def sse(reply: bytes) -> bytes:
    """The door's reply as one server-sent event (the reply is compact JSON: one line)."""
    return b"event: reply\ndata: " + reply + b"\n\n"


def record_refusal(
    dispatcher: Dispatcher,
    door: str,
    method: str,
    path: str,
    query: Mapping[str, list[str]],
    headers: Mapping[str, str],
    refusal: tuple[str, str],
) -> None:
    """A refusal of one of flightlog's own routes, filed in the Ledger like the door's own (a call
    event with the request's head, credentials redacted, and a `dispatch.refused` naming the limit),
    so every attempt a route refused can be found afterwards. A failure to record changes nothing."""
    try:
        dispatcher.file_refusal(door, call_head(method, path, query, headers), refusal)
    except Exception:  # the answer is the refusal either way; the Ledger's own errors are logged there
        return


class Door:
    """The handler for the door's routes, bound to one dispatcher and one Directory."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        render: Callable[[Tool, Mapping[str, Any]], Any],
        directory: Directory | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.render = render
        self.directory = directory
        """The Directory the dispatcher finds rows in (the MCP route serves the same one)."""

    def handle(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | list[str]],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Answer:
        """Answer one request to a door route (see the module docstring)."""
        lists = {k: v if isinstance(v, list) else [v] for k, v in query.items()}
        try:
            if path.rstrip("/") == "/api/dispatch":
                return self._dispatch(method, path, lists, headers, body)
            if path.rstrip("/") == "/api/graphql":
                return self._graphql(method, path, lists, headers, body)
            rest = path.removeprefix("/api/dispatch/").removeprefix("/api/join/")
            if rest != path and rest.partition("/")[0] in JOINS and method in ("GET", "HEAD"):
                return self._join(rest)
        except (CatalogError, StorageError) as e:
            return _error(400 if isinstance(e, CatalogError) else 503, str(e))
        return _error(
            404, f"no route {method} {path} (POST /api/dispatch, GET /api/dispatch/uses|trace|task/NAME)"
        )

    def _dispatch(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> Answer:
        refusal = browser_refusal(method, headers, body)
        if method == "GET" and "tool" in query:
            try:
                args = json.loads(query.get("args", ["{}"])[-1])
            except ValueError:
                args = None
            body = json.dumps({"tool": query["tool"][-1], "args": args}).encode()
        elif method != "POST":
            return _error(405, 'POST a canonical call {"tool": NAME, "args": {...}} to /api/dispatch')
        token = bearer(headers, query)
        try:
            call = json.loads(body or b"null")
        except ValueError:
            call = None
        credentials = from_proxy_authorization(_header(headers, "proxy-authorization"))
        who = from_headers(headers.items()).over(credentials)
        head = call_head(method, path, query, headers)
        result = self.dispatcher.dispatch(
            call,
            door="http",
            token=token,
            dry_run=_truthy(query, "dry_run"),
            identity=who,
            head=head,
            refusal=refusal,
        )
        if EVENT_STREAM in (_header(headers, "accept") or "").lower():
            return (
                result.status,
                {"content-type": EVENT_STREAM, "cache-control": "no-store"},
                sse(result.body),
            )
        return result.status, dict(JSON), result.body

    def websocket_call(
        self, message: str, token: str | None, headers: Mapping[str, str], head: bytes
    ) -> bytes:
        """One message of a WebSocket to the door: the call it holds, run like a POST's; the reply."""
        try:
            call = json.loads(message)
        except ValueError:
            call = None
        who = from_headers(headers.items()).over(
            from_proxy_authorization(_header(headers, "proxy-authorization"))
        )
        return self.dispatcher.dispatch(call, door="http", token=token, identity=who, head=head).body

    def _graphql(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> Answer:
        if method != "POST":
            return _json(405, {"errors": [{"message": "POST a GraphQL request to /api/graphql"}]})
        refusal = browser_refusal(method, headers, body)
        try:
            call: Any = read_call(json.loads(body or b"null"))
        except ValueError as e:  # GraphQLRefused is one: refused and recorded, naming the operation
            call, refusal = (
                None,
                refusal or ("graphql", str(e) if isinstance(e, GraphQLRefused) else f"not JSON: {e}"),
            )
        who = from_headers(headers.items()).over(
            from_proxy_authorization(_header(headers, "proxy-authorization"))
        )
        result = self.dispatcher.dispatch(
            call,
            door="http",
            token=bearer(headers, query),
            identity=who,
            head=call_head(method, path, query, headers),
            refusal=refusal,
        )
        reply = json.loads(result.body)
        errors = (
            [{"message": reply["refused"]["message"]}] if not reply.get("ok") and "refused" in reply else []
        )
        return _json(result.status, {"data": {"call": reply}} | ({"errors": errors} if errors else {}))

    def _join(self, rest: str) -> Answer:
        what, _, arg = rest.partition("/")
        arg = unquote(arg)
        if not arg:
            return _error(400, f"/api/join/{what}/ needs a name")
        engine = self.dispatcher.ledger.engine
        if what == "uses":
            return _json(200, {"tool": arg, "events": join.tool_uses(engine, arg)})
        if what == "task":
            return _json(200, {"task": arg, "events": join.task_events(engine, arg)})
        if what == "trace":
            version = version_in(self.directory) if self.directory is not None else None
            ledger = self.dispatcher.ledger
            found = join.trace(engine, ledger.payload, self.dispatcher.find_tool, self.render, arg, version)
            return _json(200, found.as_dict())
        if what == "token":
            token = tokens.decode(arg)
            return _json(
                200, {"identifier": token.identifier, "uses": self.dispatcher.book.used(token.identifier)}
            )
        return _error(404, f"no join {what!r} (uses, trace, task)")
