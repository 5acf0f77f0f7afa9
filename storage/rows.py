"""Pure translation between `Event` values and the `events` table's rows.

Kept free of any database handle so it is cheap to test: validation (one bad event names itself),
the content fingerprint that tells a re-delivery from a conflict, and the column tuple the insert
paths write.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, Final

from storage.errors import InvalidEvent
from storage.events import PAYLOAD_STATES, STATES_WITH_BYTES, Event, PayloadRef, StoredEvent

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
    "fingerprint",
)
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


def validate(event: Event) -> None:
    """Refuse an event the database would refuse, naming it and why, before anything is written."""

    def bad(reason: str) -> InvalidEvent:
        return InvalidEvent(str(event.event_id), reason)

    if not isinstance(event.event_id, str) or not event.event_id:
        raise bad("event_id must be a non-empty string")
    if not event.action_id:
        raise bad("action_id is empty")
    if not event.kind:
        raise bad("kind is empty")
    if event.direction not in ("in", "out"):
        raise bad(f"direction {event.direction!r} is neither 'in' nor 'out'")
    if not isinstance(event.at, datetime):
        raise bad("at is not a datetime")
    if event.payload_state not in PAYLOAD_STATES:
        raise bad(f"payload_state {event.payload_state!r} is not one of {', '.join(PAYLOAD_STATES)}")
    has_bytes = event.payload is not None
    if event.payload_state in STATES_WITH_BYTES and not has_bytes:
        raise bad(f"payload_state {event.payload_state!r} needs a payload, none was given")
    if event.payload_state not in STATES_WITH_BYTES and has_bytes:
        raise bad(f"payload_state {event.payload_state!r} cannot carry a payload")
    if not isinstance(event.head, bytes | bytearray):
        raise bad("head must be bytes")
    for name in TEXT_FIELDS:
        value = getattr(event, name)
        if value is not None and not isinstance(value, str):
            raise bad(f"{name} must be text, got {type(value).__name__}")
        if isinstance(value, str) and "\x00" in value:
            raise bad(f"{name} contains a NUL character (raw bytes belong in head or payload)")
    for name in ("status", "tokens_in", "tokens_out"):
        value = getattr(event, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise bad(f"{name} must be a non-negative integer, got {value!r}")
    if event.cost_usd is not None and (not isinstance(event.cost_usd, int | float) or event.cost_usd < 0):
        raise bad(f"cost_usd must be a non-negative number, got {event.cost_usd!r}")


def fingerprint(event: Event, address: Address | None) -> str:
    """SHA-256 over the event's whole content, in a fixed serialization that never changes."""
    meta = [
        event.event_id,
        event.action_id,
        event.collector,
        event.seq,
        utc(event.at).isoformat(),
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
        event.cost_usd,
        event.payload_state,
        list(address) if address else None,
        sorted(event.redacted),
        event.error,
        event.parent,
    ]
    h = hashlib.sha256(json.dumps(meta, separators=(",", ":"), ensure_ascii=False).encode())
    h.update(b"\x00")
    h.update(event.head)
    return h.hexdigest()


def payload_address(event: Event, addresses: dict[int, Address]) -> Address | None:
    """The (sha256, size, text) of an event's payload, from refs or the batch's hashed bytes."""
    if isinstance(event.payload, PayloadRef):
        return (event.payload.sha256, event.payload.size, event.payload.text)
    if event.payload is None:
        return None
    return addresses[id(event.payload)]


def to_row(event: Event, address: Address | None) -> tuple[Any, ...]:
    """The column values of `COLUMNS` for one event (datetimes aware UTC, bytes as bytes)."""
    sha, size, text = address if address else (None, None, None)
    return (
        event.event_id,
        event.action_id,
        event.collector,
        event.seq,
        utc(event.at),
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
        float(event.cost_usd) if event.cost_usd is not None else None,
        bytes(event.head),
        event.payload_state,
        sha,
        size,
        text,
        json.dumps(sorted(set(event.redacted))),
        event.error,
        event.parent,
        fingerprint(event, address),
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
        fingerprint=row["fingerprint"],
    )
