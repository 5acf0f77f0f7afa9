"""Recorded exchanges put straight into a Ledger, the way capture writes them, for replay and export tests."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta

from storage.events import Batch, Event
from storage.ledger import Ledger

_positions = itertools.count(1)


def head(start: str, fields: list[tuple[str, str]]) -> bytes:
    """Exact head bytes: start line and header fields joined by CRLF."""
    return "\r\n".join([start, *(f"{n}: {v}" for n, v in fields)]).encode("latin-1")


def record(
    ledger: Ledger,
    *,
    method: str,
    url: str,
    request_head: bytes,
    request_body: bytes = b"",
    status: int | None = 200,
    response_head: bytes = b"",
    response_body: bytes = b"",
    at: datetime | None = None,
    session: str | None = None,
    task: str | None = None,
    redacted: tuple[str, ...] = (),
    error: str | None = None,
    action_id: str | None = None,
) -> str:
    """Append one exchange (request and answer events, one action id) and return its action id."""
    action_id = action_id or uuid.uuid4().hex
    at = at or datetime.now(UTC)
    host = url.split("/")[2].split(":")[0]
    common = {"action_id": action_id, "collector": "test", "method": method, "url": url, "host": host}
    request = Event(
        event_id=f"{action_id}:request",
        kind="http.request",
        direction="out",
        at=at,
        seq=0,
        session=session,
        task=task,
        head=request_head,
        payload=request_body or None,
        payload_state="complete" if request_body else "none",
        redacted=redacted,
        **common,  # type: ignore[arg-type]
    )
    response = Event(
        event_id=f"{action_id}:response",
        kind="http.response",
        direction="out",
        at=at + timedelta(milliseconds=120),
        seq=1,
        status=status,
        session=session,
        task=task,
        head=response_head,
        payload=response_body or None,
        payload_state="complete" if response_body else "none",
        error=error,
        **common,  # type: ignore[arg-type]
    )
    ledger.append(Batch("test", next(_positions), (request, response)))
    return action_id
