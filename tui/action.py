"""One action: every event of one request, the request beside its answer.

Events whose direction matches the action's first event are the request side (left); the others are
the answer side (right). Payloads are read in a worker thread, all at once, before anything is drawn.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from storage.errors import StorageError
from storage.events import StoredEvent
from tui import cells
from tui.body import render
from tui.sections import body_widgets, head_text, section
from tui.source import Source


def sides(events: list[StoredEvent]) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """(request side, answer side): the first event's direction is the request's."""
    if not events:
        return [], []
    first = events[0].direction
    return [e for e in events if e.direction == first], [e for e in events if e.direction != first]


def event_widgets(event: StoredEvent, data: bytes | None, error: str | None) -> list[Widget]:
    title = f"{event.kind} · {cells.when(event.at)}" + (f" · {event.status}" if event.status else "")
    out: list[Widget] = [section(title, head_text(event))]
    if event.redacted:
        out.append(Static(f"redacted: {', '.join(event.redacted)}", classes="note", markup=False))
    body = render(data, event.head, hex_width=8) if data is not None else None
    if event.payload_sha256 is None or data is not None or error:
        out += body_widgets(event, body, error)
    return out


class ActionScreen(Screen[None]):
    """The request beside its answer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, action_id: str) -> None:
        super().__init__()
        self.action_id = action_id

    @property
    def source(self) -> Source:
        return self.app.source  # type: ignore[attr-defined]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Static(f"action {self.action_id}: reading…", id="action-title")
        with Horizontal():
            yield VerticalScroll(id="request", classes="pane")
            yield VerticalScroll(id="answer", classes="pane")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"action {self.action_id}"
        self.query_one("#request").border_title = "request"
        self.query_one("#answer").border_title = "answer"
        self.read_action(self.action_id)

    @work(thread=True, exclusive=True, group="action")
    def read_action(self, action_id: str) -> None:
        try:
            events = self.source.action(action_id)
        except StorageError as e:
            self.app.call_from_thread(self._failed, str(e))
            return
        loaded: list[tuple[StoredEvent, bytes | None, str | None]] = []
        for event in events:
            data, error = None, None
            if event.payload_sha256:
                try:
                    data = self.source.payload(event.payload_sha256)
                except StorageError as e:
                    error = str(e)
            loaded.append((event, data, error))
        self.app.call_from_thread(self._show, loaded)

    def _failed(self, message: str) -> None:
        self.query_one("#action-title", Static).update(
            f"[red]cannot read action {self.action_id}:[/] {message}"
        )

    def _show(self, loaded: list[tuple[StoredEvent, bytes | None, str | None]]) -> None:
        title = self.query_one("#action-title", Static)
        if not loaded:
            title.update(f"no events in action {self.action_id}")
            return
        request, answer = sides([e for e, _, _ in loaded])
        first = loaded[0][0]
        title.update(
            f"action {self.action_id}: {first.method or ''} {first.url or ''}  ({len(loaded)} events)"
        )
        by_id = {e.event_id: (d, err) for e, d, err in loaded}
        for pane_id, events in (("#request", request), ("#answer", answer)):
            pane = self.query_one(pane_id, VerticalScroll)
            widgets = [w for e in events for w in event_widgets(e, *by_id[e.event_id])]
            pane.mount_all(widgets or [Static("(nothing recorded on this side)")])
