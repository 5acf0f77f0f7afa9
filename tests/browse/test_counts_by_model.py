"""Counting by model files every event of a model call under its model, on SQLite and PostgreSQL.

Capture writes the model on the answer event (it is read from the answer, or the request's body
when the answer names none); the request, and events derived from the exchange, carry none. A count
by model must still put them under the call's model, not under none (issue 51: 13 of 14 events of
one conversation were counted under `(none)`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from storage.event_reads import counts
from storage.events import Batch, Event
from storage.filters import Filter
from storage.ledger import Ledger

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _event(action: str, role: str, kind: str, seq: int, model: str | None = None, **more: object) -> Event:
    return Event(
        event_id=f"{action}:{role}",
        action_id=action,
        collector="test",
        kind=kind,
        direction="out",
        at=T + timedelta(seconds=seq),
        seq=seq,
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        host="api.openai.com",
        model=model,
        **more,  # type: ignore[arg-type]
    )


def test_request_events_are_counted_under_their_calls_model(ledger: Ledger) -> None:
    """Two gpt-4o calls and a claude call (each a request with no model and an answer naming it, one
    with a refusal event beside), and a plain exchange with no model: by model, each call's events
    are under its model, the plain exchange's under none; the totals are every event."""
    events = [
        _event("c1", "request", "http.request", 1),
        _event("c1", "response", "http.response", 2, "gpt-4o", status=200, tokens_in=5, tokens_out=2),
        _event("c2", "request", "http.request", 3),
        _event("c2", "response", "http.response", 4, "gpt-4o", status=429),
        _event("c2", "refused", "policy.refused", 5, status=429),
        _event("c3", "request", "http.request", 6),
        _event("c3", "response", "http.response", 7, "claude-3-5-haiku-latest", status=200),
        _event("p1", "request", "http.request", 8),
        _event("p1", "response", "http.response", 9, status=200),
    ]
    ledger.append(Batch("test", 1, tuple(events)))
    by_model = {g.key: g.events for g in counts(ledger.engine, Filter(), "model")}
    assert by_model == {"gpt-4o": 5, "claude-3-5-haiku-latest": 2, None: 2}
    tokens = {g.key: g.tokens_in for g in counts(ledger.engine, Filter(), "model")}
    assert tokens["gpt-4o"] == 5  # tokens are on the answer only: counted once
