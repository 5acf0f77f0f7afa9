"""The door's HTTP face under `flightlog.local`: `POST /api/dispatch` and the join routes.

`Door(dispatcher, directory_tool).handle(method, path, query, headers, body) -> (status, headers, body)`
is the plain handler the proxy's local routes call (it blocks on the upstream call: run it off the
event loop). Routes:

- `POST /api/dispatch[?dry_run=1]` with `{"tool": NAME, "args": {...}}`; a scoped token as
  `Authorization: Bearer flt_...` or `?token=flt_...` (link-sized); identity from `X-Flightlog-Session`,
  `-Task`, `-Turn`, `-Agent`. Answers `{ok, result, action_id}` or `{ok: false, refused: {limit, ...}}`.
- `GET /api/join/uses/TOOL`: every event of a tool; `GET /api/join/trace/EVENT_ID`: the event, its
  action, its contract and the check; `GET /api/join/task/TASK`: everything done under a task.

The proxy never records these routes: the dispatcher records its own exchange (with the token
replaced by its identifier), and the join routes are reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from addons.dispatch import Dispatcher, Identity
from catalog import join, tokens
from catalog.errors import CatalogError
from catalog.tool import Tool
from storage.errors import StorageError

Answer = tuple[int, dict[str, str], bytes]
JSON = {"content-type": "application/json"}
PREFIXES = ("/api/dispatch", "/api/join/")


def _json(status: int, value: Any) -> Answer:
    body = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")
    return status, dict(JSON), body


def _error(status: int, message: str) -> Answer:
    return _json(status, {"ok": False, "error": message})


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _truthy(query: Mapping[str, list[str]], name: str) -> bool:
    return (query.get(name) or [""])[-1].lower() in ("1", "true", "yes")


def call_head(method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> bytes:
    """The call as it came in, for the Ledger: start line and header fields (the token hidden)."""
    pairs = [f"{k}={v}" for k, values in query.items() for v in values if k != "token"]
    target = path + ("?" + "&".join(pairs) if pairs else "")
    lines = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in headers.items()]
    return "\r\n".join(lines).encode("utf-8", "replace")


class Door:
    """The handler for the door's routes, bound to one dispatcher and one Directory."""

    def __init__(self, dispatcher: Dispatcher, render: Callable[[Tool, Mapping[str, Any]], Any]) -> None:
        self.dispatcher = dispatcher
        self.render = render

    def handle(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> Answer:
        """Answer one request to a door route (see the module docstring)."""
        try:
            if path.rstrip("/") == "/api/dispatch":
                return self._dispatch(method, path, query, headers, body)
            if path.startswith("/api/join/") and method in ("GET", "HEAD"):
                return self._join(path.removeprefix("/api/join/"))
        except (CatalogError, StorageError) as e:
            return _error(400 if isinstance(e, CatalogError) else 503, str(e))
        return _error(404, f"no route {method} {path} (see /api/dispatch, /api/join/uses|trace|task/...)")

    def _dispatch(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> Answer:
        if method != "POST":
            return _error(405, 'POST a canonical call {"tool": NAME, "args": {...}} to /api/dispatch')
        auth = _header(headers, "authorization")
        token = auth if auth and auth.lower().startswith("bearer flt_") else None
        if token is None and query.get("token"):
            token = query["token"][-1]
        try:
            call = json.loads(body or b"null")
        except ValueError:
            call = None
        who = Identity(
            session=_header(headers, "x-flightlog-session"),
            task=_header(headers, "x-flightlog-task"),
            turn=_header(headers, "x-flightlog-turn"),
            agent=_header(headers, "x-flightlog-agent"),
        )
        head = call_head(method, path, query, headers)
        result = self.dispatcher.dispatch(
            call, door="http", token=token, dry_run=_truthy(query, "dry_run"), identity=who, head=head
        )
        return result.status, dict(JSON), result.body

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
            found = join.trace(
                engine, self.dispatcher.ledger.payload, self.dispatcher.find_tool, self.render, arg
            )
            return _json(200, found.as_dict())
        if what == "token":
            token = tokens.decode(arg)
            return _json(
                200, {"identifier": token.identifier, "uses": join.token_uses(engine, token.identifier)}
            )
        return _error(404, f"no join {what!r} (uses, trace, task)")
