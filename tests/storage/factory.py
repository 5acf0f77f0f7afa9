"""Events for tests: realistic enough to exercise every column, deterministic by index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.events import Batch, Event, PayloadState

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def event(
    i: int,
    payload: bytes | None = b'{"ok": true}',
    *,
    state: PayloadState | None = None,
    action: str | None = None,
    **fields: object,
) -> Event:
    """The i-th test event: a request (even i) or its response (odd i), one action per pair."""
    request = i % 2 == 0
    values: dict[str, object] = {
        "event_id": f"ev-{i:06d}",
        "action_id": action or f"act-{i // 2:06d}",
        "kind": "http.request" if request else "http.response",
        "direction": "out",
        "at": T0 + timedelta(milliseconds=i),
        "collector": "test",
        "seq": i,
        "method": "POST",
        "url": "https://api.example.com/v1/things",
        "host": "api.example.com",
        "status": None if request else 200,
        "session": "s1",
        "agent": "alpha",
        "head": b"POST /v1/things HTTP/1.1\r\nHost: api.example.com\r\nX-Dup: a\r\nx-dup: b",
        "payload": payload,
        "payload_state": state or ("none" if payload is None else "complete"),
    }
    values.update(fields)
    return Event(**values)  # type: ignore[arg-type]


def batch(events: list[Event], position: int = 1, collector: str = "test") -> Batch:
    return Batch(collector=collector, position=position, events=tuple(events))
