"""The Ledger's read routes under `/api/ledger/`, as one pure function the proxy's own routes call.

`handle(method, path, query, headers, body, *, ledger, token)` returns `(status, headers, body)` and
imports nothing of mitmproxy, so it is tested with plain values. `ledger_handler(ledger, home)` gives
the five-argument form bound to one Ledger and the token kept in `home`: `addons.local_routes`
registers it for `/api/ledger/` over the Ledger the proxy records to (never recorded itself).

Routes (every one needs `Authorization: Bearer TOKEN`, the token kept in FLIGHTLOG_HOME/api-token; in
the proxy, the gate judges the request first and a scoped token it admits for `ledger` reads too):

    GET  /api/ledger/row/EVENT_ID      one event whole (JSON; the exact head also as head_base64)
    GET  /api/ledger/action/ACTION_ID  every event of one request
    GET  /api/ledger/blob/SHA256       the payload's raw bytes exactly as kept
    GET  /api/ledger/counts[?by=X&...] totals over a filter, or counted by X when `by` is given
    GET  /api/ledger/group?by=X&...    counted by hour, session, turn, kind, agent, model, tool or task
    POST /api/ledger/query             {"filter": {...}, "limit": N, "before": [at, event_id]}
    GET  /api/ledger/ask?q=WORDS       a question in plain words, answered with events, a sum or groups
    GET  /api/ledger/tally?by=X[,Y]&...   events, tokens and cost summed per combination of keys
    GET  /api/ledger/state             each collector's position, last commit, lag, batches and drops
    GET  /api/ledger/screen[?q=WORDS]  the browser's first screen: newest events, totals, kinds, collectors

Filter fields in a query string use the `Filter`'s names (`agent=alpha&status=errors&since=...`).
"""

from __future__ import annotations

import functools
import hmac
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from sqlalchemy.engine import Engine

from readback.errors import ReadbackError
from storage.errors import PrunedPayload, StorageError
from storage.event_reads import counts, event_json, groups_json, totals
from storage.events import StoredEvent
from storage.filters import GROUP_BYS, Filter, QueryError, parse_time
from storage.key_files import KeyFileError, secret_token
from storage.questions.answer import answer, page
from storage.questions.known_values import LedgerValues
from storage.questions.reading import ask
from storage.tally import collectors, state_answer, tally_answer

PREFIX: Final = "/api/ledger/"
TOKEN_FILE: Final = "api-token"
MAX_LIMIT: Final = 1000
Response = tuple[int, dict[str, str], bytes]


class LedgerReader(Protocol):
    """The part of `storage.ledger.Ledger` the routes read through."""

    engine: Engine

    def event(self, event_id: str) -> StoredEvent | None: ...

    def action(self, action_id: str) -> list[StoredEvent]: ...

    def payload(self, sha256: str) -> bytes: ...


def api_token(home: Path) -> str:
    """The bearer token of the read routes, created on first use (32 random bytes, file mode 0600)."""
    try:
        return secret_token(home, home / TOKEN_FILE, "API token")
    except KeyFileError as e:
        raise ReadbackError(str(e)) from e


def _json(status: int, value: Any) -> Response:
    body = json.dumps(value, ensure_ascii=False, sort_keys=True).encode()
    return status, {"content-type": "application/json", "cache-control": "no-store"}, body


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message})


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def authorized(headers: Mapping[str, str], token: str) -> bool:
    """True when the request carries `Authorization: Bearer <token>` (compared in constant time)."""
    value = _header(headers, "authorization") or ""
    scheme, _, given = value.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token)


def filter_from_query(query: Mapping[str, str]) -> Filter:
    """The `Filter` named by query-string fields; `by`, `limit`, `q` and `before` are not filter fields."""
    data: dict[str, Any] = {k: v for k, v in query.items() if k not in ("by", "limit", "q", "before")}
    if "url" in data:
        data["url"] = str(data["url"]).split()
    return Filter.from_json(data)


def _limit(value: Any) -> int:
    try:
        limit = int(value)
    except (TypeError, ValueError) as e:
        raise QueryError(f"limit is a number, not {value!r}") from e
    if not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit is between 1 and {MAX_LIMIT}")
    return limit


def _page(ledger: LedgerReader, flt: Filter, limit: int, before: Any) -> dict[str, Any]:
    bound = None
    if before is not None:
        if not (isinstance(before, list | tuple) and len(before) == 2):
            raise QueryError('before is [at, event_id], as given in "next"')
        bound = (parse_time(str(before[0])), str(before[1]))
    return page(ledger.engine, flt, limit, bound)


def _row(ledger: LedgerReader, rest: str, *_: Any) -> Response:
    event = ledger.event(rest)
    return _json(200, event_json(event)) if event else _error(404, f"no event {rest!r}")


def _action(ledger: LedgerReader, rest: str, *_: Any) -> Response:
    events = ledger.action(rest)
    if not events:
        return _error(404, f"no action {rest!r}")
    return _json(200, {"action_id": rest, "events": [event_json(e) for e in events]})


def _blob(ledger: LedgerReader, rest: str, *_: Any) -> Response:
    sha = rest.lower()
    if len(sha) != 64 or any(ch not in "0123456789abcdef" for ch in sha):
        return _error(400, "a blob is addressed by its SHA-256 in hex (64 characters)")
    try:
        data = ledger.payload(sha)
    except PrunedPayload as e:  # its events stay; the bytes are gone on purpose, under a signed record
        return _error(410, str(e))
    except StorageError as e:
        missing = "missing" in type(e).__name__.lower() or "no payload" in str(e).lower()
        return _error(404 if missing else 500, str(e))
    headers = {
        "content-type": "application/octet-stream",
        "x-content-sha256": sha,
        "cache-control": "no-store",
    }
    return 200, headers, data


def _counts(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    flt = filter_from_query(query)
    by = query.get("by")
    if by is None:
        return _json(200, {"filter": flt.to_json(), **totals(ledger.engine, flt)})
    return _json(
        200, {"filter": flt.to_json(), "by": by, "groups": groups_json(counts(ledger.engine, flt, by))}
    )


def _group(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    if not query.get("by"):
        return _error(400, "group needs ?by=hour|session|turn|kind|agent|model|tool|task")
    return _counts(ledger, rest, query, body)


def _query(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    try:
        request = json.loads(body or b"{}")
    except ValueError as e:
        return _error(400, f"the body is not JSON: {e}")
    if not isinstance(request, dict):
        return _error(400, 'the body is a JSON object: {"filter": {...}, "limit": N}')
    unknown = sorted(set(request) - {"filter", "limit", "before"})
    if unknown:
        return _error(400, f"unknown field {unknown[0]!r}; the body takes filter, limit and before")
    flt = Filter.from_json(request.get("filter") or {})
    return _json(200, _page(ledger, flt, _limit(request.get("limit", 100)), request.get("before")))


def _ask(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    question = ask(query.get("q", ""), known=LedgerValues(ledger.engine))
    return _json(200, answer(ledger.engine, question, _limit(query.get("limit", 100))))


def _tally(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    by = [b for b in (query.get("by") or "").replace(",", " ").split() if b]
    if not by:
        return _error(400, f"tally needs ?by=KEY[,KEY...], keys from: {', '.join(GROUP_BYS)}")
    return _json(200, tally_answer(ledger.engine, filter_from_query(query), by))


def _state(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    return _json(200, state_answer(ledger.engine))


def _screen(ledger: LedgerReader, rest: str, query: Mapping[str, str], body: bytes) -> Response:
    """The browser's first screen as JSON: the newest events under a filter (or a question), their
    totals, the count by kind, and each collector's state."""
    words = query.get("q")
    flt = ask(words, known=LedgerValues(ledger.engine)).filter if words else filter_from_query(query)
    limit = _limit(query.get("limit", 50))
    return _json(
        200,
        {
            **_page(ledger, flt, limit, None),
            "totals": totals(ledger.engine, flt),
            "kinds": groups_json(counts(ledger.engine, flt, "kind")),
            "collectors": collectors(ledger.engine),
        },
    )


Route = Callable[[LedgerReader, str, Mapping[str, str], bytes], Response]
ROUTES: Final[dict[tuple[str, str], Route]] = {
    ("GET", "row"): _row,
    ("GET", "action"): _action,
    ("GET", "blob"): _blob,
    ("GET", "counts"): _counts,
    ("GET", "group"): _group,
    ("POST", "query"): _query,
    ("GET", "ask"): _ask,
    ("GET", "tally"): _tally,
    ("GET", "state"): _state,
    ("GET", "screen"): _screen,
}
_TAKES_ID: Final = ("row", "action", "blob")


def single_values(query: Mapping[str, Any]) -> dict[str, str]:
    """The route registry hands over `parse_qs` lists; each field here takes one value (the last)."""
    return {k: (v[-1] if v else "") if isinstance(v, list | tuple) else v for k, v in query.items()}


def handle(
    method: str,
    path: str,
    query: Mapping[str, Any],
    headers: Mapping[str, str],
    body: bytes,
    *,
    ledger: LedgerReader,
    token: str,
    also: Callable[[Mapping[str, str]], bool] | None = None,
) -> Response:
    """Answer one request to `/api/ledger/...`: 401 without the bearer token, JSON errors otherwise.

    The route registry calls it through `ledger_handler` (bound to the Ledger the proxy records to).
    """
    query = single_values(query)
    if not authorized(headers, token) and not (also is not None and also(headers)):
        status, out, payload = _error(401, "the Ledger's routes need 'Authorization: Bearer <token>'")
        return status, {**out, "www-authenticate": 'Bearer realm="flightlog"'}, payload
    if not path.startswith(PREFIX):
        return _error(404, f"not a Ledger route: {path}")
    name, _, rest = path[len(PREFIX) :].partition("/")
    method = method.upper()
    route = ROUTES.get(("GET" if method == "HEAD" else method, name))
    if route is None:
        allowed = [m for (m, n) in ROUTES if n == name]
        if allowed:
            status, out, payload = _error(405, f"{path} takes {', '.join(allowed)}")
            return status, {**out, "allow": ", ".join(allowed)}, payload
        return _error(404, f"no such Ledger route: {path}")
    if (name in _TAKES_ID) != bool(rest):
        return _error(404, f"{PREFIX}{name}/ takes an id" if name in _TAKES_ID else f"no such route: {path}")
    try:
        status, out, payload = route(ledger, rest, query, body)
    except QueryError as e:
        return _error(400, str(e))
    except StorageError as e:
        return _error(500, str(e))
    return (status, out, b"") if method == "HEAD" else (status, out, payload)


Handler = Callable[[str, str, Mapping[str, Any], Mapping[str, str], bytes], Response]


def ledger_handler(ledger: LedgerReader, home: Path) -> Handler:
    """`handle` bound to a Ledger and the token kept in `home` (only that token is accepted)."""
    return functools.partial(handle, ledger=ledger, token=api_token(home))


def judged_handler(ledger: LedgerReader) -> Handler:
    """`handle` bound to a Ledger, for a route the gate judged first (`door.gatekeeper`): what
    `addons.local_routes` registers, so a scoped token the gate admitted is not asked for again."""
    return functools.partial(handle, ledger=ledger, token="", also=lambda _headers: True)
