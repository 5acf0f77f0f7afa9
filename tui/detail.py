"""One event whole: its metadata, the exact head, the body made readable, the join and replay.

The payload is read in a worker thread (it may sit in S3, or be megabytes); the head is shown byte for
byte (as Latin-1, one character per byte). Redacted secret names and the payload state are always on
screen, so nobody mistakes a redacted or partial body for the original.
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from formats.terminal_text import shown, shown_lines
from storage.errors import PrunedPayload, StorageError
from storage.events import StoredEvent
from tui import cells
from tui.body import MODES, Mode, render
from tui.dialogs import OutputScreen
from tui.errors import TuiError
from tui.exchange_keys import join_text, show_replay
from tui.sections import body_widgets, head_text, section
from tui.source import Source

__all__ = ["DetailScreen", "OutputScreen"]


class DetailScreen(Screen[None]):
    """Everything about one event; `m` cycles the body between readable, text and hex.

    `a` asks the app for the event's exchange (`ActionWanted`): the screen does not know the other
    screens, the app that owns the stack opens it above this one.
    """

    class ActionWanted(Message):
        """The user asked for the whole action of the event shown."""

        def __init__(self, action_id: str) -> None:
            super().__init__()
            self.action_id = action_id

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("m", "cycle_mode", "Body: auto/text/hex"),
        Binding("a", "open_action", "Action"),
        Binding("r", "replay", "Replay"),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, event: StoredEvent) -> None:
        super().__init__()
        self.event = event
        self.mode: Mode = "auto"
        self.data: bytes | None = None
        self.error: str | None = None

    @property
    def source(self) -> Source:
        return self.app.source  # type: ignore[attr-defined]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with VerticalScroll(id="detail"):
            width = max(len(k) for k, _ in cells.summary(self.event))
            yield section(
                "event",
                "\n".join(f"{k.ljust(width)}  {v}" for k, v in cells.summary(self.event)),
                classes="section",
            )
            yield section("head (exact bytes)", head_text(self.event))
            with VerticalScroll(id="body"):
                yield from body_widgets(self.event, None)
            if self.event.tool:
                yield section(f"Directory: {self.event.tool}", "reading…", classes="section join")
        yield Footer()

    def on_mount(self) -> None:
        # the kind names an MCP method, which a client chose
        self.sub_title = shown(f"{self.event.kind} {self.event.event_id}")
        if self.event.payload_sha256:
            self.read_payload(self.event.payload_sha256)
        if self.event.tool:
            self.read_join(self.event.tool)

    @work(thread=True, group="payload")
    def read_payload(self, sha256: str) -> None:
        try:
            data, error = self.source.payload(sha256), None
        except PrunedPayload as e:  # removed under a signed record: when and why, not a fault
            data, error = None, e.note
        except StorageError as e:
            data, error = None, str(e)
        self.app.call_from_thread(self._show_payload, data, error)

    def _show_payload(self, data: bytes | None, error: str | None) -> None:
        self.data, self.error = data, error
        self.show_body()

    def show_body(self) -> None:
        box = self.query_one("#body", VerticalScroll)
        box.remove_children()
        body = render(self.data, self.event.head, self.mode) if self.data is not None else None
        box.mount_all(body_widgets(self.event, body, self.error))

    @work(thread=True, group="join")
    def read_join(self, tool: str) -> None:
        try:
            text = join_text(tool, self.source.tool(tool))
        except TuiError as e:
            text = f"tool {tool}: {e}"
        except Exception as e:  # the Directory is another package; its failure must not close this screen
            text = f"tool {tool}: the Directory could not answer ({type(e).__name__}: {e})"
        self.app.call_from_thread(self._show_join, text)

    def _show_join(self, text: str) -> None:
        self.query_one(".join", Static).update(shown_lines(text))

    def action_cycle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.notify(f"body shown as {self.mode}", timeout=2)
        if self.data is not None:
            self.show_body()

    def action_open_action(self) -> None:
        self.post_message(self.ActionWanted(self.event.action_id))

    def action_replay(self) -> None:
        self.notify(f"replaying {self.event.action_id}…", timeout=3)
        self.run_replay(self.event.action_id)

    @work(thread=True, exclusive=True, group="replay")
    def run_replay(self, action_id: str) -> None:
        show_replay(self, self.source, action_id)
