"""`flightlog browse`: the Ledger in the terminal, newest first, following new events.

The main screen is a table fed by keyset pages read in worker threads (never on the UI thread), so a
ledger of a million events opens as fast as one of ten: the first page is one indexed read, the next
page loads when the cursor nears the end, and a timer asks for anything newer than the top row. A
filter bar takes plain words (`storage.ask`) and shows the filter it understood, or why it refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import ClassVar, Final

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from storage.ask import ask
from storage.errors import StorageError
from storage.events import StoredEvent
from storage.queries import Filter, cursor
from tui import cells
from tui.action import ActionScreen
from tui.counts import CountsScreen
from tui.detail import DetailScreen
from tui.source import Source

PAGE: Final = 200
"""Rows per read; the next page loads when the cursor is within `PAGE // 4` rows of the end."""


class EventsScreen(Screen[None]):
    """The live table of events, newest first, with the filter bar above it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("enter", "open_event", "Detail", show=True),
        Binding("a", "open_action", "Action"),
        Binding("c", "counts", "Counts"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("r", "refresh", "Refresh"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.events: list[StoredEvent] = []
        self.pending: list[StoredEvent] = []
        """Newer events read while the cursor was away from the top; shown when it comes back."""
        self.generation = 0
        self.exhausted = False
        self.reading = False
        """A page read is under way (not `loading`: that is Widget's own, and would cover the screen)."""

    @property
    def browse(self) -> BrowseApp:
        app = self.app
        assert isinstance(app, BrowseApp)
        return app

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Input(placeholder="ask in plain words, e.g. errors from agent alpha yesterday", id="filter")
        yield Static(id="understood")
        table: DataTable[object] = DataTable(id="events", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#events", DataTable)
        table.add_columns(*cells.COLUMNS)
        self.show_understood()
        table.focus()
        question = self.browse.initial_question
        if question:
            self.query_one("#filter", Input).value = question
        if not (question and self.browse.apply_question(question)):
            self.reload()
        if self.browse.follow_seconds:
            self.set_interval(self.browse.follow_seconds, self.poll)

    # -- reading, in worker threads --------------------------------------------------------------

    def reload(self) -> None:
        """Start over from the newest event under the current filter."""
        self.generation += 1
        self.events = []
        self.pending = []
        self.exhausted = False
        self.query_one("#events", DataTable).clear()
        self.next_page(None)

    def next_page(self, before: tuple[datetime, str] | None) -> None:
        """Read one more page (marked loading at once, so a second request cannot race it)."""
        self.reading = True
        self.show_status()
        self.load_page(self.generation, self.browse.filter, before)

    @work(thread=True, exclusive=True, group="page")
    def load_page(self, generation: int, flt: Filter, before: tuple[datetime, str] | None) -> None:
        try:
            page = self.browse.source.page(flt, limit=PAGE, before=before)
        except StorageError as e:
            self.app.call_from_thread(self._failed, generation, str(e))
            return
        self.app.call_from_thread(self._add_page, generation, page)

    @work(thread=True, exclusive=True, group="follow")
    def load_newer(self, generation: int, flt: Filter, after: tuple[datetime, str]) -> None:
        try:
            newer = self.browse.source.newer(flt, after=after, limit=PAGE)
        except StorageError as e:
            self.app.call_from_thread(self._failed, generation, str(e))
            return
        if newer:
            self.app.call_from_thread(self._prepend, generation, newer)

    def _failed(self, generation: int, message: str) -> None:
        self.reading = False
        if generation == self.generation:
            self.query_one("#status", Static).update(f"[red]cannot read the Ledger:[/] {message}")

    def _add_page(self, generation: int, page: list[StoredEvent]) -> None:
        self.reading = False
        if generation != self.generation:
            return
        self.exhausted = len(page) < PAGE
        known = {e.event_id for e in self.events[-PAGE:]}
        page = [e for e in page if e.event_id not in known]
        self.events += page
        table = self.query_one("#events", DataTable)
        for event in page:
            table.add_row(*cells.row(event), key=event.event_id)
        self.show_status()

    def _prepend(self, generation: int, newer: list[StoredEvent]) -> None:
        """Put newer events on top: at once when the cursor is on the top row, else when it gets there."""
        if generation != self.generation:
            return
        known = {e.event_id for e in self.pending + self.events[: PAGE + 1]}
        self.pending = [e for e in newer if e.event_id not in known] + self.pending
        if self.query_one("#events", DataTable).cursor_row <= 0:
            self.show_pending()
        self.show_status()

    def show_pending(self) -> None:
        """Redraw with the newest events on top, keeping one page (older rows reload as the cursor moves)."""
        if not self.pending:
            return
        self.events = (self.pending + self.events)[:PAGE]
        self.exhausted = False
        self.pending = []
        table = self.query_one("#events", DataTable)
        table.clear()
        for event in self.events:
            table.add_row(*cells.row(event), key=event.event_id)
        table.move_cursor(row=0, animate=False)

    def poll(self) -> None:
        """Follow new events: ask for anything newer than the top row."""
        if not self.browse.following or self.reading:
            return
        top = self.pending[0] if self.pending else self.events[0] if self.events else None
        if top is not None:
            self.load_newer(self.generation, self.browse.filter, cursor(top))
        else:
            self.reload()

    @on(DataTable.RowHighlighted, "#events")
    def near_end(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row == 0 and self.pending:
            self.show_pending()
            self.show_status()
        elif not self.exhausted and not self.reading and event.cursor_row >= len(self.events) - PAGE // 4:
            self.next_page(cursor(self.events[-1]))

    # -- showing --------------------------------------------------------------------------------

    def show_status(self) -> None:
        shown = f"{len(self.events):,} events shown" + ("" if self.exhausted else "+")
        follow = "following new events" if self.browse.following else "paused"
        if self.pending:
            follow += f" · {len(self.pending):,} newer above (go to the top row)"
        loading = " · reading…" if self.reading else ""
        self.query_one("#status", Static).update(f"{shown} · newest first · {follow}{loading}")

    def show_understood(self, refused: str | None = None) -> None:
        label = self.query_one("#understood", Static)
        if refused:
            label.update(f"[red]not understood:[/] {refused}")
            return
        text = f"filter: {self.browse.filter.describe()}"
        if self.browse.unknown:
            text += "   [yellow]did not understand:[/] " + ", ".join(repr(w) for w in self.browse.unknown)
        label.update(text)

    def selected(self) -> StoredEvent | None:
        table = self.query_one("#events", DataTable)
        if not self.events or table.cursor_row < 0 or table.cursor_row >= len(self.events):
            return None
        return self.events[table.cursor_row]

    # -- actions --------------------------------------------------------------------------------

    @on(Input.Submitted, "#filter")
    def apply_filter(self, event: Input.Submitted) -> None:
        self.browse.apply_question(event.value)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.browse.apply_question("")
        self.query_one("#events", DataTable).focus()

    @on(DataTable.RowSelected, "#events")
    def action_open_event(self) -> None:
        event = self.selected()
        if event is not None:
            self.app.push_screen(DetailScreen(event))

    def action_open_action(self) -> None:
        event = self.selected()
        if event is not None:
            self.app.push_screen(ActionScreen(event.action_id))

    def action_counts(self) -> None:
        self.browse.action_counts()

    def action_toggle_follow(self) -> None:
        self.browse.following = not self.browse.following
        self.show_status()

    def action_refresh(self) -> None:
        self.reload()


class BrowseApp(App[None]):
    """The browser: give it a `Source`; `now` fixes the clock words like 'yesterday' are read against."""

    TITLE = "flightlog"
    SUB_TITLE = "the Ledger"
    CSS_PATH = "browse.tcss"

    def __init__(
        self,
        source: Source,
        *,
        question: str = "",
        flt: Filter | None = None,
        follow_seconds: float | None = 1.0,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.filter = flt or Filter()
        self.unknown: tuple[str, ...] = ()
        self.follow_seconds = follow_seconds
        self.following = bool(follow_seconds)
        self.now = now or (lambda: datetime.now(UTC))
        self.initial_question = question

    def get_default_screen(self) -> Screen[None]:
        """The events table is the bottom of the screen stack: escape always comes back to it."""
        return EventsScreen()

    @property
    def events_screen(self) -> EventsScreen:
        for screen in self.screen_stack:
            if isinstance(screen, EventsScreen):
                return screen
        raise LookupError("the events screen is not open")

    def apply_question(self, words: str) -> bool:
        """Read plain words into the filter and start over; a refusal keeps the old filter (False)."""
        screen = self.events_screen
        try:
            question = ask(words, self.now()) if words.strip() else None
        except StorageError as e:
            screen.show_understood(refused=str(e))
            return False
        self.filter = question.filter if question else Filter()
        self.unknown = question.unknown if question else ()
        screen.show_understood()
        screen.reload()
        if question and question.group_by:
            self.action_counts()
        return True

    def action_counts(self) -> None:
        self.push_screen(CountsScreen(self.filter))

    def on_detail_screen_action_wanted(self, message: DetailScreen.ActionWanted) -> None:
        """The detail screen asked for its event's action: open it above the detail."""
        self.push_screen(ActionScreen(message.action_id))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.events_screen
        yield SystemCommand(
            "Counts", "Events per hour; tokens and cost by model, tool, session", self.action_counts
        )
        yield SystemCommand(
            "Follow new events", "Start or stop following new events", main.action_toggle_follow
        )
        yield SystemCommand("Show errors", "Filter: status >= 400 or an error recorded", self._errors)
        yield SystemCommand("Clear the filter", "Show every event again", main.action_clear_filter)
        yield SystemCommand("Refresh", "Read the newest events again", main.reload)

    def _errors(self) -> None:
        self.events_screen.query_one("#filter", Input).value = "errors"
        self.apply_question("errors")
