"""Pure translation between `Event` values and the `events` table's rows.

Kept free of any database handle so it is cheap to test: validation (one bad event names itself),
the column tuple the insert paths write, and the content fingerprint that tells a re-delivery from
a conflict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from storage.errors import InvalidEvent
from storage.escaped import needs_escape
from storage.events import PAYLOAD_STATES, STATES_WITH_BYTES, Event, PayloadRef, StoredEvent
from storage.sqlite_setup import sqlite_time

COLUMNS: Final = (
    "event_id",
    "action_id",
    "collector",
    "seq",
    "at",
    "kind",
    "direction",
    "method",
    "url",
    "host",
    "status",
    "tool",
    "session",
    "task",
    "turn",
    "agent",
    "model",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "head",
    "payload_state",
    "payload_sha256",
    "payload_size",
    "payload_text",
    "redacted",
    "error",
    "parent",
    "escaped",
    "first_byte_ms",
    "last_byte_ms",
    "first_token_ms",
    "client_bytes",
    "client_left_ms",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cache_write_1h_tokens",
)
TOKEN_DETAILS: Final = (
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "cache_write_1h_tokens",
)
"""Counts within `tokens_in` / `tokens_out` that providers price apart (migrations 0011, 0012)."""
TIMING_FIELDS: Final = ("first_byte_ms", "last_byte_ms", "first_token_ms", "client_left_ms")
TEXT_FIELDS: Final = (
    "event_id",
    "action_id",
    "collector",
    "kind",
    "method",
    "url",
    "host",
    "tool",
    "session",
    "task",
    "turn",
    "agent",
    "model",
    "error",
    "parent",
)

Address = tuple[str, int, bool]
"""(sha256, size, text) of a payload."""


def utc(at: datetime) -> datetime:
    """`at` as an aware UTC datetime; a naive one is taken to be UTC already."""
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _text_fields(event: Event) -> tuple[str | None, ...]:
    return (
        event.event_id,
        event.action_id,
        event.collector,
        event.kind,
        event.method,
        event.url,
        event.host,
        event.tool,
        event.session,
        event.task,
        event.turn,
        event.agent,
        event.model,
        event.error,
        event.parent,
    )


def validate(event: Event) -> None:
    """Refuse an event the database would refuse, naming it and why, before anything is written.

    Runs for every event of every batch, so the common case is a handful of cheap checks; the
    slow path only runs to name the field that failed.
    """

    def bad(reason: str) -> InvalidEvent:
        return InvalidEvent(str(event.event_id), reason)

    if not event.event_id or not isinstance(event.event_id, str):
        raise bad("event_id must be a non-empty string")
    if not event.action_id:
        raise bad("action_id is empty")
    if not event.kind:
        raise bad("kind is empty")
    if event.direction != "in" and event.direction != "out":
        raise bad(f"direction {event.direction!r} is neither 'in' nor 'out'")
    if not isinstance(event.at, datetime):
        raise bad("at is not a datetime")
    state = event.payload_state
    if state not in PAYLOAD_STATES:
        raise bad(f"payload_state {state!r} is not one of {', '.join(PAYLOAD_STATES)}")
    has_bytes = event.payload is not None
    if has_bytes != (state in STATES_WITH_BYTES):
        if has_bytes:
            raise bad(f"payload_state {state!r} cannot carry a payload")
        raise bad(f"payload_state {state!r} needs a payload, none was given")
    head = event.head
    if type(head) is not bytes and not isinstance(head, bytes | bytearray):  # the common case first
        raise bad("head must be bytes")
    try:
        joined = "".join([t for t in _text_fields(event) if t is not None])
    except TypeError:
        joined = "\x00"
    if "\x00" in joined or (not joined.isascii() and needs_escape(joined)):  # ASCII: no surrogate
        for name in TEXT_FIELDS:
            value = getattr(event, name)
            if value is not None and not isinstance(value, str):
                raise bad(f"{name} must be text, got {type(value).__name__}")
            if value is not None and "\x00" in value:
                raise bad(f"{name} contains a NUL character (raw bytes belong in head or payload)")
            if value is not None and needs_escape(value):
                raise bad(f"{name} contains a lone surrogate (store storage.escaped's form, flagged escaped)")
    status, tokens_in, tokens_out = event.status, event.tokens_in, event.tokens_out
    if not (_count(status) and _count(tokens_in) and _count(tokens_out)):
        for name, value in (("status", status), ("tokens_in", tokens_in), ("tokens_out", tokens_out)):
            if not _count(value):
                raise bad(f"{name} must be a non-negative integer, got {value!r}")
    cost = event.cost_usd
    if cost is not None and (type(cost) not in (int, float) or cost < 0):
        raise bad(f"cost_usd must be a non-negative number, got {cost!r}")
    first, last, token = event.first_byte_ms, event.last_byte_ms, event.first_token_ms
    left = event.client_left_ms
    if not (first is None and last is None and token is None and left is None):
        for name, value in zip(TIMING_FIELDS, (first, last, token, left), strict=True):
            if value is not None and type(value) not in (int, float):
                raise bad(f"{name} must be a number of milliseconds, got {value!r}")
    if not _count(event.client_bytes):
        raise bad(f"client_bytes must be a non-negative integer, got {event.client_bytes!r}")
    read, write, reasoning = event.cache_read_tokens, event.cache_write_tokens, event.reasoning_tokens
    hour = event.cache_write_1h_tokens
    if not (_count(read) and _count(write) and _count(reasoning) and _count(hour)):
        for name, value in zip(TOKEN_DETAILS, (read, write, reasoning, hour), strict=True):
            if not _count(value):
                raise bad(f"{name} must be a non-negative integer, got {value!r}")


def _count(value: object) -> bool:
    """None or a non-negative int (not a bool, not a float)."""
    return value is None or (type(value) is int and value >= 0)


_NORMALIZED: Final = frozenset(
    {"at", "head", "payload_text", "cost_usd", "redacted", "escaped", *TIMING_FIELDS}
)
"""Columns whose stored form differs by dialect (or did not exist in older rows): normalized first."""
_DELIVERY: Final = frozenset({"seq"})
"""Columns that say how an event was delivered, not what it is: a writer process restarted by the
proxy numbers the frames it is handed again from 1, so a re-delivered event carries another `seq`
and is still the same event (a duplicate, not a conflict)."""


def content_fingerprint(values: Mapping[str, Any]) -> str:
    """SHA-256 over an event row's whole content, whether offered (a `to_row` tuple zipped with
    `COLUMNS`) or read back from either database; tells a re-delivery from a conflict. Its delivery
    (`_DELIVERY`: the writer's `seq`) is not content.

    Only computed when some events of a batch were already stored, so the hot path never pays.
    """
    at = values["at"]
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    text = values["payload_text"]
    cost = values["cost_usd"]
    meta = [values.get(c) for c in COLUMNS if c not in _NORMALIZED and c not in _DELIVERY]
    meta += [
        utc(at).isoformat(),
        None if text is None else bool(text),
        None if cost is None else float(cost),
        sorted(json.loads(values["redacted"] or "[]")),
        bool(values.get("escaped")),
        *(None if values.get(c) is None else float(values[c]) for c in TIMING_FIELDS),
    ]
    h = hashlib.sha256(json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode())
    h.update(b"\x00")
    h.update(bytes(values["head"]))
    return h.hexdigest()


def payload_address(event: Event, addresses: dict[int, Address]) -> Address | None:
    """The (sha256, size, text) of an event's payload, from refs or the batch's hashed bytes."""
    if isinstance(event.payload, PayloadRef):
        return (event.payload.sha256, event.payload.size, event.payload.text)
    if event.payload is None:
        return None
    return addresses[id(event.payload)]


def to_row(event: Event, address: Address | None, *, text_time: bool = False) -> tuple[Any, ...]:
    """The column values of `COLUMNS` for one event (bytes as bytes; the time aware UTC, or with
    `text_time` SQLAlchemy's SQLite text `YYYY-MM-DD HH:MM:SS.ffffff`, so the SQLite insert needs no
    second tuple per row)."""
    sha, size, text = address if address else (None, None, None)
    at = event.at
    if at.tzinfo is not UTC:  # what the producers give is aware UTC already: no new datetime
        at = utc(at)
    cost, first, last, token = event.cost_usd, event.first_byte_ms, event.last_byte_ms, event.first_token_ms
    left = event.client_left_ms
    return (
        event.event_id,
        event.action_id,
        event.collector,
        event.seq,
        sqlite_time(at) if text_time else at,
        event.kind,
        event.direction,
        event.method,
        event.url,
        event.host,
        event.status,
        event.tool,
        event.session,
        event.task,
        event.turn,
        event.agent,
        event.model,
        event.tokens_in,
        event.tokens_out,
        None if cost is None else float(cost),
        event.head if type(event.head) is bytes else bytes(event.head),
        event.payload_state,
        sha,
        size,
        text,
        json.dumps(sorted(set(event.redacted))) if event.redacted else "[]",
        event.error,
        event.parent,
        bool(event.escaped),
        None if first is None else float(first),
        None if last is None else float(last),
        None if token is None else float(token),
        event.client_bytes,
        None if left is None else float(left),
        event.cache_read_tokens,
        event.cache_write_tokens,
        event.reasoning_tokens,
        event.cache_write_1h_tokens,
    )


def from_mapping(row: Any) -> StoredEvent:
    """A `StoredEvent` from a result row of `SELECT * FROM events` (either dialect)."""
    at = row["at"]
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    text = row["payload_text"]
    return StoredEvent(
        event_id=row["event_id"],
        action_id=row["action_id"],
        kind=row["kind"],
        direction=row["direction"],
        at=utc(at),
        collector=row["collector"],
        seq=row["seq"],
        method=row["method"],
        url=row["url"],
        host=row["host"],
        status=row["status"],
        tool=row["tool"],
        session=row["session"],
        task=row["task"],
        turn=row["turn"],
        agent=row["agent"],
        model=row["model"],
        tokens_in=row["tokens_in"],
        tokens_out=row["tokens_out"],
        cost_usd=row["cost_usd"],
        head=bytes(row["head"]),
        payload_state=row["payload_state"],
        payload_sha256=row["payload_sha256"],
        payload_size=row["payload_size"],
        payload_text=None if text is None else bool(text),
        redacted=tuple(json.loads(row["redacted"] or "[]")),
        error=row["error"],
        parent=row["parent"],
        escaped=bool(row.get("escaped")),
        first_byte_ms=row.get("first_byte_ms"),
        last_byte_ms=row.get("last_byte_ms"),
        first_token_ms=row.get("first_token_ms"),
        client_bytes=row.get("client_bytes"),
        client_left_ms=row.get("client_left_ms"),
        cache_read_tokens=row.get("cache_read_tokens"),
        cache_write_tokens=row.get("cache_write_tokens"),
        reasoning_tokens=row.get("reasoning_tokens"),
        cache_write_1h_tokens=row.get("cache_write_1h_tokens"),
        fingerprint=content_fingerprint(dict(row)),
    )
