"""A small, fixed Ledger for the browse tests: five actions (ten events) over four hours of one day.

Built with the Ledger's own API (`open_ledger` + `append`), so the reads under test see rows exactly as
the writer leaves them. `NOW` is the frozen clock the tests (and the TUI snapshots) use.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

NOW = datetime(2026, 11, 29, 14, 30, tzinfo=UTC)
T0 = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)

CHAT_REQUEST = json.dumps(
    {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()
CHAT_SSE = (
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
    b"data: [DONE]\n\n"
)
BINARY = bytes(range(256)) * 2


def _head(start: str, *fields: tuple[str, str]) -> bytes:
    return ("\r\n".join([start, *(f"{k}: {v}" for k, v in fields)]) + "\r\n\r\n").encode()


def _pair(
    n: int,
    at: datetime,
    *,
    method: str,
    url: str,
    status: int,
    request: bytes | None = None,
    answer: bytes | None = None,
    direction: str = "out",
    ctype: str = "application/json",
    **meta: object,
) -> tuple[Event, Event]:
    """One exchange: the request and its answer, linked by one action id."""
    host = url.split("/")[2]
    action = f"a{n}"
    usage = {k: meta.pop(k) for k in ("tokens_in", "tokens_out", "cost_usd") if k in meta}
    error = meta.pop("error", None)
    redacted = meta.pop("redacted", ())
    common = {"action_id": action, "collector": "test", "method": method, "url": url, "host": host, **meta}
    req = Event(
        event_id=f"{action}-request",
        kind="http.request",
        direction=direction,  # type: ignore[arg-type]
        at=at,
        seq=2 * n,
        head=_head(f"{method} {url} HTTP/1.1", ("Host", host), ("Authorization", "[OPENAI_API_KEY]")),
        payload=request,
        payload_state="complete" if request is not None else "none",
        redacted=redacted,  # type: ignore[arg-type]
        **common,  # type: ignore[arg-type]
    )
    res = Event(
        event_id=f"{action}-response",
        kind="http.response",
        direction="in" if direction == "out" else "out",
        at=at + timedelta(milliseconds=850),
        seq=2 * n + 1,
        status=status,
        head=_head(f"HTTP/1.1 {status} X", ("Content-Type", ctype)),
        payload=answer,
        payload_state="complete" if answer is not None else "none",
        error=error,  # type: ignore[arg-type]
        **usage,  # type: ignore[arg-type]
        **common,  # type: ignore[arg-type]
    )
    return req, res


def sample_events() -> tuple[Event, ...]:
    """The fixed events: two agents, two sessions, three models, errors, a webhook with binary bytes."""
    pairs = [
        _pair(
            1,
            T0,
            method="POST",
            url="https://api.openai.com/v1/chat/completions",
            status=200,
            request=CHAT_REQUEST,
            answer=CHAT_SSE,
            ctype="text/event-stream",
            agent="alpha",
            session="s1",
            task="t1",
            turn="1",
            model="gpt-4o",
            tokens_in=100,
            tokens_out=20,
            cost_usd=0.0015,
            redacted=("OPENAI_API_KEY",),
        ),
        _pair(
            2,
            T0 + timedelta(minutes=20),
            method="GET",
            url="https://api.github.com/repos/acme/app",
            status=404,
            answer=b'{"message": "Not Found"}',
            agent="alpha",
            session="s1",
            task="t1",
            turn="2",
            tool="github.get_repo",
        ),
        _pair(
            3,
            T0 + timedelta(hours=1),
            method="POST",
            url="https://api.anthropic.com/v1/messages",
            status=200,
            request=b'{"model": "claude-sonnet"}',
            answer=b'{"content": [{"text": "ok"}]}',
            agent="beta",
            session="s2",
            task="t2",
            turn="1",
            model="claude-sonnet",
            tokens_in=300,
            tokens_out=50,
            cost_usd=0.0042,
        ),
        _pair(
            4,
            T0 + timedelta(hours=2),
            method="POST",
            url="https://api.openai.com/v1/chat/completions",
            status=502,
            agent="beta",
            session="s2",
            task="t2",
            turn="2",
            model="gpt-4o",
            error="upstream reset",
        ),
        _pair(
            5,
            T0 + timedelta(hours=3, minutes=10),
            method="POST",
            url="https://hooks.example.com/stripe/events",
            status=200,
            request=BINARY,
            answer=b"ok",
            ctype="text/plain",
            direction="in",
            tool="stripe.webhook",
        ),
    ]
    return tuple(e for pair in pairs for e in pair)


def fill(ledger: Ledger) -> None:
    """Append the sample as two batches, as a collector would."""
    events = sample_events()
    ledger.append(Batch("test", 1, events[:4]))
    ledger.append(Batch("test", 2, events[4:]))


@pytest.fixture
def sample_ledger(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """The sample on SQLite and on PostgreSQL (the `ledger_url` parametrization)."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    fill(ledger)
    yield ledger
    ledger.close()


@pytest.fixture
def sqlite_sample(tmp_path: Path) -> Iterator[Ledger]:
    """The sample on SQLite only, for tests about something other than the dialect."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    fill(ledger)
    yield ledger
    ledger.close()
