"""Small screens the keys open: a page of text (a replay's diff, a curl command, a Directory row), the
export format chooser, and the help screen listing every key.
"""

from __future__ import annotations

from typing import ClassVar, Final

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Header, Static

from tui.sections import section

FORMATS: Final = {"h": "har", "m": "mitmproxy", "j": "jsonl"}

HELP: Final = (
    ("Lists (exchanges and events)", ""),
    ("enter", "open the exchange: request, answer, conversation, timing, Ledger row"),
    ("status 200*", "the answer is partial: its stream ended before it was whole"),
    ("space / right", "expand an exchange: its WebSocket, door and MCP messages under it"),
    ("v", "switch between exchanges and events one by one"),
    ("/", "filter in the plain words of `ledger query` (escape clears it)"),
    ("f", "follow new events, or pause"),
    ("c", "counts: tables and sparklines over time per model, tool and session"),
    ("ctrl+r", "read the newest rows again"),
    ("Any exchange (in a list or open)", ""),
    ("r", "replay it and show the answer diff"),
    ("e", "export it (h HAR, m mitmproxy, j JSON lines); E in a list exports every exchange shown"),
    ("y", "copy it as curl, secrets left as [NAME]"),
    ("d", "open its tool's Directory row (a dispatch call)"),
    ("An open exchange", ""),
    ("1 … 7", "tabs: request, answer, conversation, inner, timing, Ledger row, mcp"),
    ("m", "bodies as readable / text / hex"),
    ("escape", "back"),
    ("Everywhere", ""),
    ("A", "requests an egress `ask` rule holds: y approves the selected one, n refuses it"),
    ("?", "this help"),
    ("ctrl+p", "command palette"),
    ("q", "back, or quit from a list"),
    ("ctrl+c", "quit"),
)


def help_text() -> str:
    width = max(len(k) for k, v in HELP if v)
    return "\n".join(f"{k.ljust(width)}  {v}" if v else f"\n{k}" for k, v in HELP).strip()


class OutputScreen(Screen[None]):
    """A scrollable page of text (what a replay printed, a curl command, a Directory row)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with VerticalScroll():
            yield section(self.title_text, self.text)
        yield Footer()


class HelpScreen(OutputScreen):
    """Every key of the browser, on one page."""

    def __init__(self) -> None:
        super().__init__("keys", help_text())


class ExportScreen(ModalScreen[str | None]):
    """Pick the format to export in; dismissed with it (or None on escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "choose(None)", "Cancel"),
        *(Binding(k, f"choose('{fmt}')", fmt) for k, fmt in FORMATS.items()),
    ]

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static(f"export {self.what} as:", markup=False)
            yield Static("\n".join(f"  {k}  {fmt}" for k, fmt in FORMATS.items()), markup=False)
            yield Static("  escape  cancel", markup=False)

    def action_choose(self, fmt: str | None) -> None:
        self.dismiss(fmt)
