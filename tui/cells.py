"""How one event becomes a line of the table, and how figures are written: short, aligned, stable."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final
from urllib.parse import urlsplit

from rich.text import Text

from formats import terminal_text
from storage.events import StoredEvent
from tui import figures
from tui.error_kinds import error_kind

COLUMNS: Final = (
    "time (UTC)",
    "kind",
    "dir",
    "method",
    "status",
    "host",
    "path",
    "agent",
    "session",
    "model",
    "tokens",
    "cost",
)


def when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{at.microsecond // 1000:03d}"


cost = figures.cost
tokens = figures.tokens


def status(event: StoredEvent) -> Text:
    """The status code, or the kind of failure when none came (as the exchange list says it)."""
    if event.error:
        return Text(str(event.status) if event.status else error_kind(event.error), style="bold red")
    if event.status is None:
        return Text("")
    style = "red" if event.status >= 500 else "yellow" if event.status >= 400 else "green"
    return Text(str(event.status), style=style)


def path(url: str | None, width: int = 48) -> str:
    if not url:
        return ""
    parts = urlsplit(url)
    text = (parts.path or "/") + (f"?{parts.query}" if parts.query else "") if parts.scheme else url
    return text if len(text) <= width else text[: width - 1] + "…"


def row(event: StoredEvent) -> tuple[str | Text, ...]:
    """The table cells of one event, in `COLUMNS` order."""
    return (
        when(event.at),
        event.kind,
        event.direction,
        event.method or "",
        status(event),
        event.host or "",
        path(event.url),
        event.agent or "",
        event.session or "",
        event.model or "",
        tokens(event.tokens_in, event.tokens_out),
        cost(event.cost_usd),
    )


def summary(event: StoredEvent) -> list[tuple[str, str]]:
    """Label and value of every metadata field that is set, for the detail view. Each value is
    `shown` on its one line: an error or a header value holding a newline would otherwise draw a
    line of its own that reads as another field."""
    pairs = [
        ("event", event.event_id),
        ("action", event.action_id),
        ("at", when(event.at)),
        ("kind", f"{event.kind} ({'inbound' if event.direction == 'in' else 'outbound'})"),
        ("method", event.method or ""),
        ("url", event.url or ""),
        ("status", "" if event.status is None else str(event.status)),
        ("error", event.error or ""),
        ("agent", event.agent or ""),
        ("session", event.session or ""),
        ("task", event.task or ""),
        ("turn", event.turn or ""),
        ("tool", event.tool or ""),
        ("model", event.model or ""),
        ("tokens", tokens(event.tokens_in, event.tokens_out)),
        (
            "of them",
            figures.token_details(
                event.cache_read_tokens,
                event.cache_write_tokens,
                event.reasoning_tokens,
                event.cache_write_1h_tokens,
            ),
        ),
        ("cost", cost(event.cost_usd)),
        ("payload", payload_line(event)),
        ("redacted", ", ".join(event.redacted) if event.redacted else "nothing"),
        ("parent", event.parent or ""),
        ("collector", f"{event.collector} #{event.seq}"),
    ]
    return [(k, terminal_text.shown(v)) for k, v in pairs if v]


def payload_line(event: StoredEvent) -> str:
    state = event.payload_state
    if event.payload_sha256 is None:
        return state
    kind = "text" if event.payload_text else "binary"
    return f"{state}, {event.payload_size:,} bytes {kind}, sha256 {event.payload_sha256}"
