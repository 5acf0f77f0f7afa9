"""Turning the hooks' records into Ledger events: redaction, payload state, usage and cost.

Pure functions run on the writer thread. Stated exceptions to exact bytes, each applied here:
secret values are replaced by their names (`redact`), a request body streamed through unread is
`missing`, and a stream cut short is `partial`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from recording.records import (
    AttemptRecord,
    Exchange,
    RequestRecord,
    ResponseRecord,
    SwapRecord,
    WebSocketRecord,
)
from recording.spent import NOTHING, Spent, usage_of
from storage import kinds
from storage.escaped import escape_event
from storage.events import Event, PayloadRef, PayloadState

if TYPE_CHECKING:
    from recording.prices import PriceTable
    from recording.redaction.redact import Redactor

UsageFn = Callable[[str, bytes, bytes, str | None, str | None], Any]
__all__ = ["NOTHING", "Processing", "Spent", "usage_of"]


@dataclass(frozen=True, slots=True)
class Processing:
    """What the writer does to every record: redact with `redactor`, read usage, price it."""

    redactor: Redactor | None = None
    extract_usage: UsageFn | None = None
    prices: PriceTable | None = None


def when(timestamp: float) -> datetime:
    """A mitmproxy timestamp (seconds since the epoch) as an aware UTC datetime."""
    return datetime.fromtimestamp(timestamp, UTC)


def _names(*groups: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(frozenset().union(*groups)))


def _redact_common(
    proc: Processing, exchange: Exchange, head: bytes
) -> tuple[str, bytes, frozenset[str], frozenset[str]]:
    if proc.redactor is None:
        return exchange.url, head, frozenset(), frozenset()
    url, url_names = proc.redactor.redact_url(exchange.url)
    head, head_names = proc.redactor.redact_head(head)
    return url, head, frozenset(url_names), frozenset(head_names)


def redact_body(proc: Processing, body: bytes, content_encoding: str) -> tuple[bytes, frozenset[str]]:
    """The body with secrets replaced (inside its content-encoding), and the names replaced."""
    redacted, names, _ = redacted_body(proc, body, content_encoding)
    return redacted, names


def redacted_body(
    proc: Processing, body: bytes, content_encoding: str
) -> tuple[bytes, frozenset[str], str | None]:
    """`redact_body`, and the note an event carries when the body was searched as stored, not
    decoded (it would not decode, or decoded past its cap: a decompression bomb)."""
    if proc.redactor is None or not body:
        return body, frozenset(), None
    redacted, names, problem = proc.redactor.redact_body_noting(body, content_encoding or None)
    return redacted, frozenset(names), None if problem is None else f"The body was {problem}"


def _exchange_event(
    ex: Exchange, role: str, kind: str, at: float, url: str, *, collector: str, seq: int, **fields: Any
) -> Event:
    """An event of one exchange: what every event of it shares (ids, where, who), plus `fields`.

    Text a client or upstream sent that the databases cannot hold (invalid UTF-8, NUL) is stored in
    its lossless escaped form and the event flagged `escaped`; the exact bytes stay in `head`."""
    return escape_event(
        Event(
            event_id=kinds.event_id(ex.flow_id, role),
            action_id=ex.flow_id,
            kind=kind,
            direction="in" if ex.direction == "in" else "out",
            at=when(at),
            collector=collector,
            seq=seq,
            method=ex.method,
            url=url,
            host=ex.host,
            agent=ex.identity.agent,
            session=ex.identity.session,
            task=ex.identity.task,
            turn=ex.identity.turn,
            **fields,
        )
    )


def request_event(proc: Processing, rec: RequestRecord, *, collector: str, seq: int) -> Event:
    """The `http.request` event of a record."""
    ex = rec.exchange
    url, head, url_names, head_names = _redact_common(proc, ex, rec.head)
    payload: bytes | None
    state: PayloadState
    body_names: frozenset[str] = frozenset()
    note = None
    if rec.body is None:
        payload, state = None, "missing"  # stated exception: over the size limit, streamed through unread
    elif not rec.body:
        payload, state = None, "none"
    else:
        payload, body_names, note = redacted_body(proc, rec.body, rec.content_encoding)
        state = "complete"
    return _exchange_event(
        ex,
        kinds.REQUEST_ROLE,
        kinds.HTTP_REQUEST,
        rec.at,
        url,
        collector=collector,
        seq=seq,
        head=head,
        payload=payload,
        payload_state=state,
        redacted=_names(url_names, head_names, body_names),
        error=note,
    )


def offsets_ms(
    timing: tuple[float | None, float | None, float | None, float | None],
) -> tuple[float | None, float | None, float | None]:
    """(first byte, last byte, first token) in milliseconds after the request started; None where
    a time is unknown. The first token is the arrival of a streamed answer's first content event
    (`formats.first_token`), put in the record by the writer that read the chunks."""
    started, first, last, chunk = timing
    if started is None:
        return None, None, None
    return _after(first, started), _after(last, started), _after(chunk, started)


def _after(point: float | None, started: float) -> float | None:
    return None if point is None else round(max(0.0, point - started) * 1000, 3)


def response_event(
    proc: Processing,
    rec: ResponseRecord,
    payload: bytes | PayloadRef | None,
    *,
    body_names: frozenset[str],
    usage: Spent,
    note: str | None = None,
    collector: str,
    seq: int,
) -> Event:
    """The `http.response` event: `payload` is the (already redacted) body or its stored address."""
    ex = rec.exchange
    url, head, url_names, head_names = _redact_common(proc, ex, rec.head)
    state: PayloadState
    if payload is None or (isinstance(payload, bytes) and not payload):
        payload, state = None, "none"
    else:
        state = "partial" if rec.partial else "complete"
    model = usage.model
    first_byte, last_byte, first_token = offsets_ms(rec.timing)
    return _exchange_event(
        ex,
        kinds.RESPONSE_ROLE,
        kinds.HTTP_RESPONSE,
        rec.at,
        url,
        collector=collector,
        seq=seq,
        status=rec.status,
        head=head,
        payload=payload,
        payload_state=state,
        redacted=_names(url_names, head_names, body_names),
        error="; ".join(e for e in (rec.error, note) if e) or None,
        model=model,
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        cost_usd=usage.cost,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        cache_write_1h_tokens=usage.cache_write_1h,
        reasoning_tokens=usage.reasoning,
        first_byte_ms=first_byte,
        last_byte_ms=last_byte,
        first_token_ms=first_token
        if rec.streamed and model is not None and (rec.status or 0) < 400
        else None,
        client_bytes=rec.client_bytes,
        client_left_ms=_left_ms(rec),
    )


def _left_ms(rec: ResponseRecord) -> float | None:
    started = rec.timing[0]
    return None if rec.client_left is None or started is None else _after(rec.client_left, started)


def attempt_event(proc: Processing, rec: AttemptRecord, *, collector: str, seq: int) -> Event:
    """The `connection.error` event of a connection that failed before any exchange on it."""
    ex = rec.exchange
    url, url_names = proc.redactor.redact_url(ex.url) if proc.redactor is not None else (ex.url, frozenset())
    return _exchange_event(
        ex,
        kinds.ATTEMPT_ROLE,
        kinds.CONNECTION_ERROR,
        rec.at,
        url,
        collector=collector,
        seq=seq,
        error=rec.error,
        redacted=_names(frozenset(url_names)),
    )


def swap_event(proc: Processing, rec: SwapRecord, *, collector: str, seq: int) -> Event:
    """The `credential.swapped` event of an exchange whose lent placeholders the proxy swapped for the
    real secrets: their names in `redacted` (the values are never in the record)."""
    ex = rec.exchange
    url, url_names = proc.redactor.redact_url(ex.url) if proc.redactor is not None else (ex.url, frozenset())
    return _exchange_event(
        ex,
        kinds.SWAPPED_ROLE,
        kinds.CREDENTIAL_SWAPPED,
        rec.at,
        url,
        collector=collector,
        seq=seq,
        redacted=_names(frozenset(url_names) | frozenset(rec.names)),
    )


NORMAL_CLOSES = frozenset({1000, 1001, 1005})
"""Normal closure, going away, and a close frame without a code (RFC 6455 7.4.1): not errors."""


def close_error(code: int | None) -> str | None:
    """What went wrong, for a WebSocket close code that is not a normal end (None when it is)."""
    if code in NORMAL_CLOSES:
        return None
    if code is None or code == 1006:
        return "WebSocket closed without a close frame (1006: connection lost)"
    return f"WebSocket closed with code {code}"


def websocket_event(proc: Processing, rec: WebSocketRecord, *, collector: str, seq: int) -> Event:
    """A `websocket.*` event: one message (secrets replaced, as in any body) or the close."""
    ex = rec.exchange
    url, url_names = proc.redactor.redact_url(ex.url) if proc.redactor is not None else (ex.url, frozenset())
    payload, names = redact_body(proc, rec.content, "")
    role = "ws:close" if rec.origin == "close" else f"ws:{rec.index}"
    return _exchange_event(
        ex,
        role,
        kinds.WEBSOCKET_KINDS[rec.origin],
        rec.at,
        url,
        collector=collector,
        seq=seq,
        status=rec.code,
        payload=payload or None,
        payload_state="complete" if payload else "none",
        error=close_error(rec.code) if rec.origin == "close" else None,
        redacted=_names(frozenset(url_names), names),
    )


def overflow_event(collector: str, number: int, dropped: int, at: float) -> Event:
    """The record that `dropped` queued items were lost while the Ledger could not keep up."""
    return Event(
        event_id=f"overflow:{collector}:{int(at * 1000)}:{number}",
        action_id=f"overflow:{collector}:{int(at * 1000)}:{number}",
        kind=kinds.CAPTURE_OVERFLOW,
        direction="out",
        at=when(at),
        collector=collector,
        error=f"{dropped} captured items dropped: the writer queue was full",
    )


def proxy_overflow_event(collector: str, run: str, frame: int, dropped: int, at: float) -> Event:
    """The record that the proxy dropped `dropped` items at its own bound (the writer process fell
    behind), as reported in its frame `frame`. The id names the proxy's run and that frame, and `at`
    is the proxy's time of the report: a frame sent again to a restarted writer is the same event."""
    event_id = f"overflow:{collector}:{run}:{frame}"
    return Event(
        event_id=event_id,
        action_id=event_id,
        kind=kinds.CAPTURE_OVERFLOW,
        direction="out",
        at=when(at),
        collector=collector,
        error=f"{dropped} captured items dropped: the proxy's queue to the writer process was full",
    )


def _error_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:500]


def unrecordable_event(event: Event, error: BaseException) -> Event:
    """What is filed instead of an event the Ledger refused: its bytes (head and payload), where it
    went, and the error, as a `capture.unrecordable` event with an id derived from the original's
    (a re-delivery is the same record). Only the columns a database cannot refuse are kept."""
    payload = event.payload
    return escape_event(
        Event(
            event_id=f"unrecordable:{event.event_id}",
            action_id=event.action_id,
            kind=kinds.CAPTURE_UNRECORDABLE,
            direction=event.direction,
            at=event.at,
            collector=event.collector,
            seq=event.seq,
            method=event.method,
            url=event.url,
            host=event.host,
            head=bytes(event.head),
            payload=payload or None,
            payload_state="complete" if payload else "none",
            error=f"{event.kind} {event.event_id} not recordable: {_error_line(error)}",
            parent=event.event_id,
        )
    )


def unrecordable_record(
    rec: RequestRecord | ResponseRecord | WebSocketRecord | AttemptRecord,
    error: BaseException,
    *,
    collector: str,
    seq: int,
) -> Event:
    """A record that could not even become an event (a bug in redaction or usage reading, say):
    its head and body as they arrived, filed as `capture.unrecordable` with the error."""
    ex = rec.exchange
    body: bytes | None = None
    head = b""
    if isinstance(rec, WebSocketRecord):
        body = rec.content
    elif not isinstance(rec, AttemptRecord):
        body, head = rec.body, rec.head
    role = f"record:{type(rec).__name__}:{rec.index if isinstance(rec, WebSocketRecord) else ''}"
    return _exchange_event(
        ex,
        f"unrecordable:{role}",
        kinds.CAPTURE_UNRECORDABLE,
        rec.at,
        ex.url,
        collector=collector,
        seq=seq,
        head=head,
        payload=body or None,
        payload_state="complete" if body else "none",
        error=f"record not recordable: {_error_line(error)}",
    )
