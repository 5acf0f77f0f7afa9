"""The agent API over HTTP: a pure handler for `/api/directory/...`, wired by the proxy.

    GET  /api/directory[/manifest][?bundle=B][&names=1]      text/tab-separated-values: every row
    GET  /api/directory/search?q=WORDS[&k=N][&bundle=B]      (also /find) TSV: pos, score, layer, matched
    GET  /api/directory/get?ids=a,b[&ids=c][&section=S][&offset=N][&limit=N][&find=P]   framed text
    GET  /api/directory/row/ID                               the whole document, ETag = its hash
    GET  /api/directory/snapshot                             JSON {snapshot, concepts, revision}
    POST /api/directory/write   {bundle, path, content, replaces?}   (or If-Match: "H")
    POST /api/directory/delete  {bundle, path, replaces}             (or If-Match: "H")
    POST /api/directory/transact {changes, expected_revision?}
    GET  /api/directory/history[?before=CURSOR][&limit=N]
    POST /api/directory/restore {revision, expected_revision}

Reads are unbounded (callers are programs). Writes answer JSON; a refused precondition is 412 with
`retry_with` (the hash) when retrying with it is the fix, an expected revision that moved is 409,
an indeterminate commit is 500 without `retry_with`, a bad path 400, an unknown row 404.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final
from weakref import WeakKeyDictionary

from catalog.agent_api import AgentApi
from catalog.directory import Directory
from catalog.errors import (
    BadAlias,
    BadPath,
    CatalogError,
    Indeterminate,
    LocalCommandRefused,
    Refused,
    RevisionConflict,
    UnknownBundle,
    UnknownRow,
)

PREFIX: Final = "/api/directory/"
TSV: Final = "text/tab-separated-values; charset=utf-8"
TEXT: Final = "text/plain; charset=utf-8"
JSON: Final = "application/json"
MARKDOWN: Final = "text/markdown; charset=utf-8"

Response = tuple[int, dict[str, str], bytes]
_APIS: WeakKeyDictionary[Directory, AgentApi] = WeakKeyDictionary()
"""One `AgentApi` per Directory, so its manifest cache outlives a request."""


class _BadRequest(Exception):
    pass


def handle(
    method: str,
    path: str,
    query: Mapping[str, list[str]],
    headers: Mapping[str, str],
    body: bytes,
    directory: Directory,
) -> Response:
    """Answer one request under `/api/directory/`: `(status, headers, body)`."""
    route = path.split("?", 1)[0].removeprefix(PREFIX.rstrip("/")).strip("/") or "manifest"  # bare: the rows
    api = _APIS.get(directory)
    if api is None:
        api = _APIS[directory] = AgentApi(directory)
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if route.startswith("row/"):
            _method(method, "GET")
            doc = directory.document(route.removeprefix("row/"))
            return 200, {"content-type": MARKDOWN, "etag": f'"{doc.hash}"'}, doc.text.encode()
        handler = ROUTES.get(route)
        if handler is None:
            return _json(404, {"error": f"no route /api/directory/{route}", "routes": sorted(ROUTES)})
        return handler(api, method.upper(), _Query(query), lowered, body)
    except _BadRequest as e:
        return _json(400, {"error": str(e)})
    except _MethodNotAllowed as e:
        return 405, {"content-type": JSON, "allow": e.allow}, _dumps({"error": f"use {e.allow}"})
    except CatalogError as e:
        return _error(e)


class _MethodNotAllowed(Exception):
    def __init__(self, allow: str) -> None:
        super().__init__(allow)
        self.allow = allow


def _method(method: str, allow: str) -> None:
    if method.upper() != allow:
        raise _MethodNotAllowed(allow)


class _Query:
    def __init__(self, raw: Mapping[str, list[str]]) -> None:
        self.raw = raw

    def one(self, name: str) -> str | None:
        values = self.raw.get(name) or []
        return values[-1] if values and values[-1] != "" else None

    def integer(self, name: str) -> int | None:
        value = self.one(name)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            raise _BadRequest(f"{name} must be an integer, not {value!r}") from None

    def flag(self, name: str) -> bool:
        return (self.one(name) or "").lower() in ("1", "true", "yes")


def _manifest(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "GET")
    return 200, {"content-type": TSV}, api.manifest(q.one("bundle"), q.flag("names")).encode()


def _search(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "GET")
    words = q.one("q") or q.one("query")
    if not words:
        raise _BadRequest("search needs q=WORDS")
    return 200, {"content-type": TSV}, api.search(words, q.integer("k"), q.one("bundle")).encode()


def _get(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "GET")
    ids = [x for v in q.raw.get("ids", []) + q.raw.get("id", []) for x in v.replace(",", " ").split()]
    if not ids:
        raise _BadRequest("get needs ids=ID[,ID...]")
    text = api.get(ids, q.one("section"), q.integer("offset"), q.integer("limit"), q.one("find"))
    return 200, {"content-type": TEXT}, text.encode()


def _snapshot(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "GET")
    snap = api.directory.snapshot()
    return _json(200, {"snapshot": snap.digest, "concepts": snap.concepts, "revision": snap.revision})


def _write(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "POST")
    doc = _body(body, "bundle", "path", "content", "replaces")
    bundle, path = _text(doc, "bundle"), _text(doc, "path")
    replaces = _replaces(doc, h)
    done = api.directory.write(bundle, path, _text(doc, "content"), replaces)
    return _committed(done, hash=done.hashes[f"{bundle}/{path}"])


def _delete(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "POST")
    doc = _body(body, "bundle", "path", "replaces")
    done = api.directory.delete(_text(doc, "bundle"), _text(doc, "path"), _replaces(doc, h))
    return _committed(done)


def _transact(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "POST")
    doc = _body(body, "changes", "expected_revision", "expectedRevision")
    changes = doc.get("changes")
    if not isinstance(changes, list):
        raise _BadRequest("transact needs changes: a list of {operation, bundle, path, content?, replaces?}")
    expected = doc.get("expected_revision", doc.get("expectedRevision"))
    if expected is not None and not isinstance(expected, int):
        raise _BadRequest("expected_revision must be an integer")
    return _committed(api.directory.transact(changes, expected))


def _history(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "GET")
    return 200, {"content-type": TSV}, api.history(q.one("before"), q.integer("limit")).encode()


def _restore(api: AgentApi, method: str, q: _Query, h: Mapping[str, str], body: bytes) -> Response:
    _method(method, "POST")
    doc = _body(body, "revision", "expected_revision", "expectedRevision")
    revision = doc.get("revision")
    expected = doc.get("expected_revision", doc.get("expectedRevision"))
    if not isinstance(revision, int) or not isinstance(expected, int):
        raise _BadRequest("restore needs revision and expected_revision (integers)")
    return _committed(api.directory.restore(revision, expected))


ROUTES: Final[dict[str, Callable[[AgentApi, str, _Query, Mapping[str, str], bytes], Response]]] = {
    "manifest": _manifest,
    "search": _search,
    "find": _search,
    "get": _get,
    "snapshot": _snapshot,
    "write": _write,
    "delete": _delete,
    "transact": _transact,
    "history": _history,
    "restore": _restore,
}


def _body(body: bytes, *accepted: str) -> dict[str, Any]:
    """The JSON object of a request body; a field the route does not take is refused, not ignored."""
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as e:
        raise _BadRequest(f"the body is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise _BadRequest("the body must be a JSON object")
    unknown = [k for k in doc if k not in accepted]
    if unknown:
        raise _BadRequest(f'unknown field "{unknown[0]}"; the accepted ones are {", ".join(accepted)}')
    return doc


def _text(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str):
        raise _BadRequest(f"{name} is required (a string)")
    return value


def _replaces(doc: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    value = doc.get("replaces") or headers.get("if-match", "").strip().strip('"') or None
    if value is not None and not isinstance(value, str):
        raise _BadRequest("replaces must be a string (the 64-character hash)")
    return value


def _committed(done: Any, **extra: Any) -> Response:
    return _json(
        200,
        {
            "ok": True,
            **extra,
            "revision": done.revision,
            "snapshot": done.snapshot,
            "concepts": done.concepts,
            "written": done.written,
            "deleted": done.deleted,
            "warnings": list(done.warnings),
        },
    )


def _error(e: CatalogError) -> Response:
    status = 500
    payload: dict[str, Any] = {"ok": False, "error": str(e)}
    if isinstance(e, LocalCommandRefused):
        status = 403
    elif isinstance(e, Refused):
        status = 412
        if e.retry_hash:
            payload["retry_with"] = e.retry_hash
    elif isinstance(e, RevisionConflict):
        status, payload["head"] = 409, e.head
    elif isinstance(e, Indeterminate):
        status, payload["revision"] = 500, e.revision
    elif isinstance(e, BadPath | BadAlias):
        status = 400
    elif isinstance(e, UnknownRow | UnknownBundle):
        status = 404
    return _json(status, payload)


def _json(status: int, payload: Mapping[str, Any]) -> Response:
    return status, {"content-type": JSON}, _dumps(payload)


def _dumps(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
