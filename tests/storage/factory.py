"""Events for tests: realistic enough to exercise every column, deterministic by index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.engine import Engine

from storage.events import Batch, Event, PayloadState
from storage.rows import to_row

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


LEGACY_EVENT_COLUMNS = (
    "event_id, action_id, collector, seq, at, kind, direction, method, url, host, status, tool,"
    " session, task, turn, agent, model, tokens_in, tokens_out, cost_usd, head, payload_state,"
    " payload_sha256, payload_size, payload_text, redacted, error, parent"
)


def legacy_append(engine: Engine, events: list[Event], position: int = 1, collector: str = "test") -> None:
    """Record payload-less events and their batch row as flightlog did before the batch chain
    (revisions 0001-0002): the columns of revision 0001 only, no chain link."""
    sqlite = engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    with engine.begin() as conn:
        for e in events:
            row = list(to_row(e, None))[:28]  # the columns of revision 0001 come first
            if sqlite:
                row[4] = row[4].replace(tzinfo=None).isoformat(" ", "microseconds")
            marks = ", ".join(mark for _ in row)
            conn.exec_driver_sql(f"INSERT INTO events ({LEGACY_EVENT_COLUMNS}) VALUES ({marks})", tuple(row))
        stamp = T0.replace(tzinfo=None).isoformat(" ", "microseconds") if sqlite else T0
        conn.exec_driver_sql(
            "INSERT INTO batches (batch_id, collector, position, received, new, duplicates, conflicts,"
            f" raw_bytes, stored_bytes, committed_at) VALUES ({', '.join(mark for _ in range(10))})",
            (
                f"legacy-{collector}-{position}",
                collector,
                position,
                len(events),
                len(events),
                0,
                "[]",
                0,
                0,
                stamp,
            ),
        )
