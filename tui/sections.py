"""The pieces of an event both the event and the exchange screens draw: its head and its body.

One room for them, so that neither screen imports the other: screens reach each other only through
the app (a message upward, or `push_screen` by whoever owns the stack).
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static, TextArea

from formats.terminal_text import shown, shown_lines
from storage.events import StoredEvent
from tui import cells
from tui.body import Body, Mode, render
from tui.rich_text import cell, noted

LARGE = 32 * 1024
"""Characters above which a body is drawn in a scrolling text area rather than laid out whole."""


def section(title: str, content: str | Text, *, classes: str = "section") -> Static:
    """A bordered block of plain text (never read as markup, no control obeyed) titled `title`."""
    if isinstance(content, Text):
        plain = content.plain
        content = content if shown_lines(plain) == plain else Text(shown_lines(plain), style=content.style)
    else:
        content = shown_lines(content)
    widget = Static(content, classes=classes, markup=False)
    widget.border_title = cell(title)  # a border title given as a string is read as markup
    return widget


PRUNED = "pruned on "
"""How a pruned payload's error starts (`storage.errors.PrunedPayload.note`): shown as what it is."""


def body_widgets(event: StoredEvent, body: Body | None, error: str | None = None) -> list[Widget]:
    """The body as widgets: one bordered chunk per server-sent event, else one section."""
    if error:
        label = "payload " if error.startswith(PRUNED) else "payload unreadable: "
        return [Static(noted(label, "red", error), classes="note")]
    if event.payload_sha256 is None:
        return [section("body", f"no bytes kept (payload {event.payload_state})")]
    if body is None:
        return [section("body", "reading…")]
    out: list[Widget] = []
    if event.payload_state == "partial":
        out.append(Static("partial: the stream ended before its answer was complete", classes="note"))
    if body.note:
        out.append(Static(shown(body.note), classes="note", markup=False))  # may name a recorded header
    if body.kind == "sse":
        for n, chunk in enumerate(body.chunks, 1):
            out.append(section(f"event {n} of {len(body.chunks)}", chunk, classes="chunk"))
        return out
    if len(body.text) > LARGE:
        # A Static lays out every line before it draws; a read-only TextArea draws only what is visible.
        area = TextArea(shown_lines(body.text), read_only=True, soft_wrap=False, classes="large-body")
        area.border_title = cell(f"body ({body.kind}, {len(body.text):,} characters shown; scroll sideways)")
        out.append(area)
        return out
    out.append(section(f"body ({body.kind})", body.text or "(empty)"))
    return out


def head_text(event: StoredEvent) -> str:
    """The exact head, one character per byte (Latin-1), CRLFs as line breaks."""
    return event.head.decode("latin-1").rstrip("\r\n").replace("\r\n", "\n") or "(no head)"


def event_widgets(
    event: StoredEvent, data: bytes | None, error: str | None, mode: Mode = "auto"
) -> list[Widget]:
    """One event as its head (exact), its error whole, the secret names replaced in it, and its body
    made readable."""
    title = f"{event.kind} · {cells.when(event.at)}" + (f" · {event.status}" if event.status else "")
    out: list[Widget] = [section(title, head_text(event))]
    if event.error:  # the list's status column names only its kind
        out.append(Static(noted("error: ", "bold red", event.error), classes="note"))
    if event.redacted:
        names = ", ".join(event.redacted)
        out.append(
            Static(
                f"redacted: {shown(names)} (each value replaced by its [NAME])", classes="note", markup=False
            )
        )
    body = render(data, event.head, mode) if data is not None else None
    if event.payload_sha256 is None or data is not None or error:
        out += body_widgets(event, body, error)
    return out
