"""One exchange whole, in tabs: request, answer, conversation (for a model call), inner messages,
timing, the Ledger rows, and its MCP calls (each call's tool and arguments with its result).

Every event of the action and its payload are read in one worker thread before anything is drawn
(a payload may sit in S3, or be megabytes; the view shows at most `body.SHOW_MAX` bytes of it). Heads
are shown byte for byte; bodies are made readable (pretty JSON, SSE chunk by chunk, hex for binary,
content-encoding undone for reading only); the secret names replaced are shown on every event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane

from formats.conversation import Conversation, conversation, conversation_api
from formats.terminal_text import shown
from storage.errors import PrunedPayload, StorageError
from storage.events import StoredEvent
from storage.exchanges import Timing, answers, opens, timing
from tui import cells, figures, mcp_calls
from tui.body import MODES, Mode, decoded, header
from tui.conversation_text import blocks
from tui.errors import TuiError
from tui.exchange_keys import ExchangeKeys
from tui.sections import event_widgets, section

TABS = ("request", "answer", "conversation", "inner", "timing", "row", "mcp")


@dataclass(frozen=True, slots=True)
class Loaded:
    """An event with its payload bytes (or why they could not be read)."""

    event: StoredEvent
    data: bytes | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Parts:
    """An action's events sorted into the tabs' sides."""

    request: list[Loaded]
    answer: list[Loaded]
    inner: list[Loaded]


def split(loaded: list[Loaded]) -> Parts:
    """The opening event, the answer, and everything between (WebSocket, door, MCP messages)."""
    opening = [x for x in loaded if opens(x.event)][:1] or loaded[:1]
    answer = [x for x in loaded if answers(x.event) and x not in opening]
    if not answer and len(loaded) > 1 and loaded[-1] not in opening:
        answer = loaded[-1:]
    inner = [x for x in loaded if x not in opening and x not in answer]
    return Parts(opening, answer, inner)


def readable(x: Loaded | None) -> bytes | None:
    """A body with its content-encoding undone, for reading (the stored bytes are never touched)."""
    if x is None or x.data is None:
        return None
    return decoded(x.data, header(x.event.head, "content-encoding"))[0]


def answer_timing(request: StoredEvent, answer: StoredEvent | None) -> Timing:
    """The exchange's duration and first byte as the list shows them (`Exchange.timing`): the same
    function over the same columns, the answer's measured offsets where capture recorded them."""
    if answer is None:
        return timing(request.at, None)
    return timing(request.at, answer.at, answer.first_byte_ms, answer.last_byte_ms)


def timing_text(parts: Parts) -> str:
    req = parts.request[0].event if parts.request else None
    ans = parts.answer[0].event if parts.answer else None
    if req is None:
        return "no events"
    t = answer_timing(req, ans)
    rows = [
        ("request at", cells.when(req.at)),
        ("answer at", cells.when(ans.at) if ans else "(no answer recorded)"),
        ("duration", figures.duration(t.duration_ms) or "unknown"),
        ("first byte", figures.duration(t.ttfb_ms) or "not recorded (needs the capture's timing columns)"),
        (
            "first token",  # the first content delta of a streamed model answer, not its first chunk
            figures.duration(ans.first_token_ms) if ans and ans.first_token_ms is not None else "",
        ),
        ("request", f"{figures.size(req.payload_size) or 'no body'} ({req.payload_state})"),
        ("answer", f"{figures.size(ans.payload_size) or 'no body'} ({ans.payload_state})" if ans else ""),
    ]
    rows += [(f"+{(x.event.at - req.at).total_seconds() * 1000:.0f}ms", x.event.kind) for x in parts.inner]
    rows = [(k, v) for k, v in rows if v]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


class ExchangeScreen(ExchangeKeys):
    """An exchange in tabs; `1`..`6` pick a tab, `m` cycles bodies between readable, text and hex."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back", show=False),
        Binding("m", "cycle_mode", "Body: auto/text/hex"),
        *ExchangeKeys.KEYS,
        *(Binding(str(n), f"tab('{name}')", name, show=False) for n, name in enumerate(TABS, 1)),
    ]

    def __init__(self, action_id: str, tab: str = "request") -> None:
        super().__init__()
        self.action_id = action_id
        self.first_tab = tab
        self.mode: Mode = "auto"
        self.loaded: list[Loaded] = []
        self.parts = Parts([], [], [])
        self.conversation: Conversation | None = None
        self.conversation_read = False
        """The conversation tab has been shown once (its parse started)."""
        self.calls: list[mcp_calls.McpCall] = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Static(f"action {self.action_id}: reading…", id="exchange-title", markup=False)
        with TabbedContent(id="tabs"):
            for name in TABS:
                with TabPane(name if name != "row" else "Ledger row", id=f"tab-{name}"):
                    yield VerticalScroll(id=f"pane-{name}")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = shown(f"exchange {self.action_id}")
        self.read_exchange(self.action_id)

    # -- what the keys act on (ExchangeKeys) ------------------------------------------------------

    def current_action(self) -> str | None:
        return self.action_id

    def current_event(self) -> StoredEvent | None:
        return self.parts.request[0].event if self.parts.request else None

    def current_tool(self) -> str | None:
        return next((x.event.tool for x in self.loaded if x.event.tool), None)

    # -- reading ----------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="exchange")
    def read_exchange(self, action_id: str) -> None:
        try:
            events = self.source.action(action_id)
        except StorageError as e:
            self.app.call_from_thread(self._failed, str(e))
            return
        loaded = []
        for event in events:
            data, error = None, None
            if event.payload_sha256:
                try:
                    data = self.source.payload(event.payload_sha256)
                except PrunedPayload as e:
                    error = e.note
                except StorageError as e:
                    error = str(e)
            loaded.append(Loaded(event, data, error))
        parts = split(loaded)
        try:
            calls = self._mcp_calls(loaded)
        except StorageError as e:
            self.app.call_from_thread(self.notify, f"MCP calls: {e}", severity="error")
            calls = []
        self.app.call_from_thread(self._show, loaded, parts, calls)

    def _mcp_calls(self, loaded: list[Loaded]) -> list[mcp_calls.McpCall]:
        """The action's MCP requests paired with their results; a call or a result that came on
        another stream (another exchange, as a GET stream's result) is read by the call's key."""
        events = [x.event for x in loaded]
        if not any(mcp_calls.is_request(e) or mcp_calls.is_result(e) for e in events):
            return []
        known = {e.event_id for e in events}
        keys = {e.parent for e in events if e.parent and (mcp_calls.is_request(e) or mcp_calls.is_result(e))}
        for key in sorted(k for k in keys if k is not None):
            mine = [e for e in events if e.parent == key]
            if not (any(map(mcp_calls.is_request, mine)) and any(map(mcp_calls.is_result, mine))):
                events += [o for o in self.source.call_events(key) if o.event_id not in known]
        own = {x.event.event_id: x.data for x in loaded}
        wanted = [e for e in events if mcp_calls.is_request(e) or mcp_calls.is_result(e)][
            : mcp_calls.CALLS_MAX
        ]
        messages = {
            e.event_id: own[e.event_id]
            if e.payload_sha256 and e.event_id in own
            else self.source.mcp_message(e)
            for e in wanted
        }
        return mcp_calls.pair(events, messages)

    @on(TabbedContent.TabActivated, "#tabs")
    def tab_shown(self, event: TabbedContent.TabActivated) -> None:
        """The conversation is read when its tab is first shown: a big answer's JSON takes a while to
        parse, and nobody should wait for it to see the bytes."""
        if event.pane.id == "tab-conversation" and self.loaded and not self.conversation_read:
            self.conversation_read = True
            self.read_conversation(self.parts)

    @work(thread=True, exclusive=True, group="conversation")
    def read_conversation(self, parts: Parts) -> None:
        conv = None
        if parts.request and conversation_api(parts.request[0].event.url):
            first, answer = parts.request[0], parts.answer[0] if parts.answer else None
            answer_type = header(answer.event.head, "content-type") if answer else None
            conv = conversation(first.event.url, readable(first), readable(answer), answer_type)
        rows = self._directory_rows(conv) if conv else None
        self.app.call_from_thread(self._show_conversation, conv, rows)

    def _directory_rows(self, conv: Conversation) -> dict[str, str | None] | None:
        """The Directory row of every tool offered (a name with no row gives None; no Directory, None)."""
        rows: dict[str, str | None] = {}
        for name, _ in conv.tools:
            try:
                info = self.source.tool(name)
            except TuiError:
                return None
            except Exception:  # the Directory is another package; its failure must not close this screen
                return None
            rows[name] = None if info is None else str(info.row.get("id") or info.name)
        return rows

    def _failed(self, message: str) -> None:
        self.query_one("#exchange-title", Static).update(
            shown(f"cannot read action {self.action_id}: {message}")
        )

    def _show(self, loaded: list[Loaded], parts: Parts, calls: list[mcp_calls.McpCall]) -> None:
        with self.app.batch_update():  # one repaint for every tab filled, not one per tab
            self._fill_tabs(loaded, parts, calls)

    def _fill_tabs(self, loaded: list[Loaded], parts: Parts, calls: list[mcp_calls.McpCall]) -> None:
        self.loaded, self.parts, self.calls = loaded, parts, calls
        title = self.query_one("#exchange-title", Static)
        if not loaded:
            title.update(f"no events in action {self.action_id}")
            return
        first = parts.request[0].event
        answer = parts.answer[0].event if parts.answer else None
        status = f" → {answer.status}" if answer and answer.status else ""
        title.update(shown(f"{first.method or first.kind} {first.url or ''}{status}  ({len(loaded)} events)"))
        tabs = self.query_one("#tabs", TabbedContent)
        if not (parts.request and conversation_api(first.url)):
            tabs.hide_tab("tab-conversation")
        else:
            self._fill("conversation", [Static("reading the conversation…")])
        if not parts.inner:
            tabs.hide_tab("tab-inner")
        if calls:
            self._fill("mcp", [section(mcp_calls.title(c), mcp_calls.text(c)) for c in calls])
        else:
            tabs.hide_tab("tab-mcp")
        self.show_bodies()
        self._fill("timing", [section("timing", timing_text(parts))])
        self._fill("row", [self._row_widget(x.event) for x in loaded])
        self.action_tab("mcp" if calls and self.first_tab == "request" else self.first_tab)

    def _show_conversation(self, conv: Conversation | None, rows: dict[str, str | None] | None) -> None:
        self.conversation = conv
        if conv is None:
            if self.query_one("#tabs", TabbedContent).active == "tab-conversation":
                self.action_tab("request")
            self.query_one("#tabs", TabbedContent).hide_tab("tab-conversation")
            return
        self._fill("conversation", self._conversation_widgets(conv, rows))

    def visible_tabs(self) -> list[str]:
        first = self.parts.request[0].event if self.parts.request else None
        might_talk = first is not None and conversation_api(first.url) is not None
        hidden = {"conversation": not might_talk, "inner": not self.parts.inner, "mcp": not self.calls}
        return [name for name in TABS if not hidden.get(name)]

    def _conversation_widgets(self, conv: Conversation, rows: dict[str, str | None] | None) -> list[Widget]:
        answer = self.parts.answer[0].event if self.parts.answer else None
        partial = answer is not None and answer.payload_state == "partial"
        cost = answer.cost_usd if answer else None
        tokens = (answer.tokens_in, answer.tokens_out) if answer else (None, None)
        return [
            section(b.title, b.text, classes=f"section turn-{b.kind}")
            for b in blocks(conv, rows, partial=partial, cost=cost, tokens=tokens)
        ]

    @staticmethod
    def _row_widget(event: StoredEvent) -> Widget:
        summary = cells.summary(event)
        width = max(len(k) for k, _ in summary)
        return section(event.kind, "\n".join(f"{k.ljust(width)}  {v}" for k, v in summary))

    def _fill(self, name: str, widgets: list[Widget]) -> None:
        pane = self.query_one(f"#pane-{name}", VerticalScroll)
        pane.remove_children()
        pane.mount_all(widgets or [Static("(nothing recorded)")])

    def show_bodies(self) -> None:
        for name, side in (
            ("request", self.parts.request),
            ("answer", self.parts.answer),
            ("inner", self.parts.inner),
        ):
            self._fill(name, [w for x in side for w in event_widgets(x.event, x.data, x.error, self.mode)])

    # -- keys -------------------------------------------------------------------------------------

    def action_tab(self, name: str) -> None:
        if name in self.visible_tabs():
            self.query_one("#tabs", TabbedContent).active = f"tab-{name}"

    def action_cycle_mode(self) -> None:
        self.mode = MODES[(MODES.index(self.mode) + 1) % len(MODES)]
        self.notify(f"bodies shown as {self.mode}", timeout=2)
        if self.loaded:
            self.show_bodies()
