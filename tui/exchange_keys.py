"""The keys every view of an exchange answers: replay, export, copy as curl, the tool's Directory row.

A mixin for the lists and the exchange screen: each says which action, event and tool is current; the
work (a replay, an export, a Directory lookup) runs in a worker thread through the `Source`, and its
result opens as a page of text or a notice. Replay and export live in `addons`, out of the browser's
reach: `flightlog browse` hands the source functions that run them.
"""

from __future__ import annotations

import json
from typing import ClassVar

from textual import work
from textual.binding import Binding, BindingType
from textual.screen import Screen

from storage.errors import StorageError
from storage.events import StoredEvent
from storage.exchanges import OPENING_KINDS
from tui.curl import curl
from tui.dialogs import ExportScreen, OutputScreen
from tui.errors import TuiError
from tui.source import Source, ToolInfo


def join_text(tool: str, info: ToolInfo | None) -> str:
    """The Directory row of the event's tool and every contract it lists."""
    if info is None:
        return f"tool {tool!r} has no row in the Directory"
    lines = [f"{k}: {v}" for k, v in info.row.items() if isinstance(v, str | int | float)]
    for name, contract in info.contracts.items():
        lines.append(f"\n[{name}]\n{json.dumps(contract, indent=2, ensure_ascii=False)}")
    return "\n".join(lines) or f"tool {tool}"


def curl_event(events: list[StoredEvent]) -> StoredEvent | None:
    """The request to copy: the opening HTTP request, else the door's upstream request."""
    http = [e for e in events if e.method and (e.url or "").startswith(("http://", "https://"))]
    opening = [e for e in http if e.kind in OPENING_KINDS]
    upstream = [e for e in http if e.kind == "dispatch.upstream.request"]
    found = opening or upstream
    return found[0] if found else None


def show_replay(screen: Screen[None], source: Source, action_id: str) -> None:
    """Replay `action_id` (in the calling worker thread) and show its answer diff over `screen`; a
    replay that cannot run is one notice. Both the exchange and the event screens replay this way."""
    try:
        text = source.replay(action_id)
    except (TuiError, StorageError) as e:
        screen.app.call_from_thread(screen.notify, str(e), severity="error", timeout=6)
        return
    screen.app.call_from_thread(screen.app.push_screen, OutputScreen(f"replay of {action_id}", text))


class ExchangeKeys(Screen[None]):
    """Keys over the current exchange; subclasses say what is current."""

    KEYS: ClassVar[list[BindingType]] = [
        Binding("r", "replay", "Replay"),
        Binding("e", "export", "Export"),
        Binding("y", "curl", "Copy as curl"),
        Binding("d", "directory", "Directory row"),
        Binding("question_mark", "app.help", "Help"),
    ]

    @property
    def source(self) -> Source:
        return self.app.source  # type: ignore[attr-defined]

    def current_action(self) -> str | None:
        raise NotImplementedError

    def current_tool(self) -> str | None:
        raise NotImplementedError

    def export_all(self) -> list[str]:
        """Every action a list shows (for `E`); an open exchange has only its own."""
        action = self.current_action()
        return [action] if action else []

    # -- replay -----------------------------------------------------------------------------------

    def action_replay(self) -> None:
        action = self.current_action()
        if action is None:
            return
        self.notify(f"replaying {action}…", timeout=3)
        self.run_replay(action)

    @work(thread=True, exclusive=True, group="replay")
    def run_replay(self, action_id: str) -> None:
        show_replay(self, self.source, action_id)

    # -- export -----------------------------------------------------------------------------------

    def action_export(self) -> None:
        action = self.current_action()
        if action is not None:
            self._ask_format([action], f"exchange {action}")

    def action_export_all(self) -> None:
        actions = self.export_all()
        if actions:
            self._ask_format(actions, f"the {len(actions)} exchanges shown")

    def _ask_format(self, actions: list[str], what: str) -> None:
        def chosen(fmt: str | None) -> None:
            if fmt:
                self.run_export(fmt, actions)

        self.app.push_screen(ExportScreen(what), chosen)

    @work(thread=True, exclusive=True, group="export")
    def run_export(self, fmt: str, actions: list[str]) -> None:
        try:
            said = self.source.export(fmt, actions)
        except (TuiError, StorageError) as e:
            self.app.call_from_thread(self.notify, str(e), severity="error", timeout=6)
            return
        self.app.call_from_thread(self.notify, said, timeout=6)

    # -- copy as curl -----------------------------------------------------------------------------

    def action_curl(self) -> None:
        action = self.current_action()
        if action is not None:
            self.make_curl(action)

    @work(thread=True, exclusive=True, group="curl")
    def make_curl(self, action_id: str) -> None:
        try:
            event = curl_event(self.source.action(action_id))
            if event is None:
                raise TuiError(f"action {action_id} has no HTTP request to copy")
            body = self.source.payload(event.payload_sha256) if event.payload_sha256 else None
        except (TuiError, StorageError) as e:
            self.app.call_from_thread(self.notify, str(e), severity="error", timeout=6)
            return
        text = curl(event.method, event.url, event.head, body)
        self.app.call_from_thread(self._copied, action_id, text)

    def _copied(self, action_id: str, text: str) -> None:
        self.app.copy_to_clipboard(text)
        self.app.push_screen(OutputScreen(f"curl for {action_id} (copied; secrets left as [NAME])", text))

    # -- the Directory ----------------------------------------------------------------------------

    def action_directory(self) -> None:
        tool = self.current_tool()
        if tool is None:
            self.notify("this exchange names no tool", timeout=3)
            return
        self.read_tool(tool)

    @work(thread=True, exclusive=True, group="join")
    def read_tool(self, tool: str) -> None:
        try:
            text = join_text(tool, self.source.tool(tool))
        except TuiError as e:
            text = f"tool {tool}: {e}"
        except Exception as e:  # the Directory is another package; its failure must not close this screen
            text = f"tool {tool}: the Directory could not answer ({type(e).__name__}: {e})"
        self.app.call_from_thread(self.app.push_screen, OutputScreen(f"Directory: {tool}", text))
