"""A recorded HTTP exchange read back from the Ledger: the request event, its answer, their heads.

Replay, serve-replay and export all start from the same thing, the two events capture wrote for
one action (`http.request` and `http.response`), with their exact heads split into a start line
and header fields (name case, order and duplicates kept) and their bodies read (and verified) only
when asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import Engine

from storage import kinds
from storage.errors import PrunedPayload
from storage.event_reads import cursor, select_events
from storage.events import StoredEvent
from storage.filters import Filter
from storage.heads import Head, parse_head
from storage.kinds import HTTP_REQUEST, HTTP_RESPONSE
from storage.lookups import event_ids_of_actions

REQUEST_KIND: Final = HTTP_REQUEST
RESPONSE_KIND: Final = HTTP_RESPONSE
WEBSOCKET_KINDS: Final = tuple(kinds.WEBSOCKET_KINDS.values())

PayloadReader = Callable[[str], bytes]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded action: its request event and its answer event (None when none was recorded),
    and after an upgrade its WebSocket messages and close, in recorded order."""

    request: StoredEvent
    response: StoredEvent | None
    websocket: tuple[StoredEvent, ...] = ()

    @property
    def action_id(self) -> str:
        return self.request.action_id

    @property
    def request_head(self) -> Head:
        if not self.request.head and self.request.kind == kinds.CONNECTION_ATTEMPT:
            return Head(
                ((self.request.method or "CONNECT").encode(), (self.request.url or "").encode(), b""), ()
            )
        return parse_head(self.request.head)

    @property
    def response_head(self) -> Head | None:
        if (
            self.response is not None
            and not self.response.head
            and self.response.kind == kinds.POLICY_REFUSED
        ):
            status = self.response.status or 403
            reason = HTTPStatus(status).phrase.encode() if status in HTTPStatus._value2member_map_ else b""
            return Head(
                (b"HTTP/1.1", str(status).encode(), reason), ((b"content-type", b"application/json"),)
            )
        return parse_head(self.response.head) if self.response and self.response.head else None


ATTEMPT_KINDS: Final = (kinds.CONNECTION_ATTEMPT, kinds.POLICY_REFUSED)
"""What an attempt refused before any exchange (a CONNECT to a refused host) is recorded as: the
attempt naming its target, and the refusal holding the answer the client was sent."""


def exchange_from_events(events: Sequence[StoredEvent], *, attempts: bool = False) -> Exchange | None:
    """Pair the request event of an action with its answer; None when there is no request. With
    `attempts`, an attempt refused before any exchange (a CONNECT to a refused host: no request
    head was recorded) is one too, its refusal the answer (the exports show it; replay does not)."""
    request = next((e for e in events if e.kind == REQUEST_KIND), None)
    if request is None and attempts:
        request = next((e for e in events if e.kind == kinds.CONNECTION_ATTEMPT), None)
        if request is not None:
            refusal = next((e for e in events if e.kind == kinds.POLICY_REFUSED), None)
            return Exchange(request, refusal)
    if request is None:
        return None
    response = next((e for e in events if e.kind == RESPONSE_KIND), None)
    messages = sorted(
        (e for e in events if e.kind in WEBSOCKET_KINDS), key=lambda e: (e.at, e.seq, e.event_id)
    )
    return Exchange(request, response, tuple(messages))


def body(event: StoredEvent | None, read: PayloadReader) -> bytes:
    """The stored body bytes of an event (empty when it kept none), verified by the Ledger; bytes
    pruned since raise `PrunedPayload` (a replay must not send a body it no longer has)."""
    if event is None or event.payload_sha256 is None or event.payload_state not in ("complete", "partial"):
        return b""
    return read(event.payload_sha256)


def body_or_note(event: StoredEvent | None, read: PayloadReader) -> tuple[bytes, str | None]:
    """The stored body bytes of an event, or no bytes and "pruned on DATE (reason)" when they were
    removed under a signed prune record (`storage.retention.prune`): what an export shows instead."""
    if event is None or event.payload_sha256 is None or event.payload_state not in ("complete", "partial"):
        return b"", None
    try:
        return read(event.payload_sha256), None
    except PrunedPayload as e:
        return b"", e.note


def canonical_url(url: str) -> str:
    """A URL spelled one way: lower-case scheme and host, default port dropped, empty path as `/`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


@dataclass(frozen=True, slots=True)
class Selection:
    """Which recorded events a command works on: the Ledger's shared `Filter`, and optionally actions.

    Empty, it selects everything. `actions` narrows to those actions' events (an AND with the filter).
    """

    filter: Filter = field(default_factory=Filter)
    actions: tuple[str, ...] = ()


def _selected(engine: Engine, flt: Filter, page: int = 2000) -> list[tuple[str, str]]:
    """(event_id, action_id) of every event the filter matches, oldest first.

    Read through the shared `select_events` keyset pages (newest first), then turned around.
    """
    pairs: list[tuple[str, str]] = []
    before = None
    while True:
        rows = select_events(engine, flt, limit=page, before=before)
        pairs += [(e.event_id, e.action_id) for e in rows]
        if len(rows) < page:
            break
        before = cursor(rows[-1])
    pairs.reverse()
    return pairs


def _select(engine: Engine, selection: Selection) -> list[tuple[str, str]]:
    flt = selection.filter
    if not selection.actions:
        return _selected(engine, flt)
    pairs = event_ids_of_actions(engine, selection.actions)
    if flt.is_empty():
        return pairs
    matching = {event_id for event_id, _ in _selected(engine, flt)}
    return [p for p in pairs if p[0] in matching]


def select_event_ids(engine: Engine, selection: Selection) -> list[str]:
    """The ids of the selected events in recorded order."""
    return [event_id for event_id, _ in _select(engine, selection)]


def select_action_ids(engine: Engine, selection: Selection) -> list[str]:
    """The actions any selected event belongs to, in recorded order (of their first selected event).

    An action is selected by any of its events: a status filter matches the answer event, and the
    request that asked for it comes along. Actions without a recorded request are skipped later.
    """
    return list(dict.fromkeys(action for _, action in _select(engine, selection)))


def iter_exchanges(
    engine: Engine,
    events: Callable[[Sequence[str]], Iterator[StoredEvent]],
    action_ids: Sequence[str],
    chunk: int = 400,
    *,
    attempts: bool = False,
) -> Iterator[Exchange]:
    """The recorded exchange of each action, in the order given; actions without a request skipped
    (with `attempts`, attempts refused before any exchange are kept: `exchange_from_events`).

    Events are read a chunk of actions at a time (one id query, then `Ledger.events`), not one
    query per action: exporting a large selection costs a few queries per few hundred exchanges.
    """
    for start in range(0, len(action_ids), chunk):
        part = list(action_ids[start : start + chunk])
        wanted = (REQUEST_KIND, RESPONSE_KIND, *WEBSOCKET_KINDS, *(ATTEMPT_KINDS if attempts else ()))
        ids = [e for e, _ in event_ids_of_actions(engine, part, wanted)]
        grouped: dict[str, list[StoredEvent]] = {}
        for event in events(ids):
            grouped.setdefault(event.action_id, []).append(event)
        for action_id in part:
            exchange = exchange_from_events(grouped.get(action_id, []), attempts=attempts)
            if exchange is not None:
                yield exchange
