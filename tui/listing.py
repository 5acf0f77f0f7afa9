"""What the two lists share (exchanges, and events one by one): keyset pages read in worker threads,
following new rows, and the filter bar above.

A ledger of a million events opens as fast as one of ten: the first page is one indexed read, the
next page loads when the cursor nears the end, and a timer asks for anything newer than the top row.
Subclasses say what an item is (`fetch`, `key`, `position`) and how it is drawn (`draw`).
"""

from __future__ import annotations

from typing import ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Input, Static

from formats.terminal_text import shown
from storage.errors import StorageError
from storage.events import StoredEvent
from storage.filters import Cursor, Filter
from tui.browsing import Browsing
from tui.exchange_keys import ExchangeKeys
from tui.rich_text import noted

PAGE: Final = 200
"""Rows per read; the next page loads when the cursor is within `PAGE // 4` rows of the end."""


class ListScreen[T](ExchangeKeys):
    """A live table, newest first, with the filter bar above it."""

    NOUN: ClassVar[str] = "rows"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("enter", "open", "Detail", show=True),
        Binding("v", "app.switch_view", "Exchanges/events"),
        Binding("c", "app.counts", "Counts"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("ctrl+r", "refresh", "Refresh", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        *ExchangeKeys.KEYS,
        Binding("E", "export_all", "Export all shown", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.items: list[T] = []
        self.pending: list[T] = []
        """Newer items read while the cursor was away from the top; shown when it comes back."""
        self.generation = 0
        self.exhausted = False
        self.reading = False
        """A page read is under way (not `loading`: that is Widget's own, and would cover the screen)."""

    # -- what subclasses say ----------------------------------------------------------------------

    def fetch(self, flt: Filter, before: Cursor | None, after: Cursor | None) -> list[T]:
        raise NotImplementedError

    def key(self, item: T) -> str:
        raise NotImplementedError

    def position(self, item: T) -> Cursor:
        raise NotImplementedError

    def draw(self, added: list[T], *, everything: bool) -> None:
        """Show `added` at the end of the table, or (`everything`) redraw `self.items` whole."""
        raise NotImplementedError

    def row_index(self) -> int:
        """The item index under the cursor (the table may hold more rows than items)."""
        return self.table.cursor_row

    def selected_event(self) -> StoredEvent | None:
        raise NotImplementedError

    def current_action(self) -> str | None:
        event = self.selected_event()
        return event.action_id if event else None

    def current_tool(self) -> str | None:
        event = self.selected_event()
        return event.tool if event else None

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def browse(self) -> Browsing:
        return self.app  # type: ignore[return-value]

    @property
    def table(self) -> DataTable[object]:
        return self.query_one(DataTable)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Input(placeholder="ask in plain words, e.g. errors from agent alpha yesterday", id="filter")
        yield Static(id="understood")
        yield DataTable(id=self.NOUN, cursor_type="row", zebra_stripes=True)
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.NOUN
        self.show_understood(self.browse.refused)
        self.browse.refused = None
        self.table.focus()
        self.query_one("#filter", Input).value = self.browse.question
        self.reload()
        if self.browse.follow_seconds:
            self.set_interval(self.browse.follow_seconds, self.poll)

    def reload(self) -> None:
        """Start over from the newest item under the current filter."""
        self.generation += 1
        self.items = []
        self.pending = []
        self.exhausted = False
        self.draw([], everything=True)
        self.next_page(None)

    def next_page(self, before: Cursor | None) -> None:
        """Read one more page (marked reading at once, so a second request cannot race it)."""
        self.reading = True
        self.show_status()
        self.load_page(self.generation, self.browse.filter, before)

    @work(thread=True, exclusive=True, group="page")
    def load_page(self, generation: int, flt: Filter, before: Cursor | None) -> None:
        try:
            page = self.fetch(flt, before, None)
        except StorageError as e:
            self.app.call_from_thread(self._failed, generation, str(e))
            return
        self.app.call_from_thread(self._add_page, generation, page)

    @work(thread=True, exclusive=True, group="follow")
    def load_newer(self, generation: int, flt: Filter, after: Cursor) -> None:
        try:
            newer = self.fetch(flt, None, after)
        except StorageError as e:
            self.app.call_from_thread(self._failed, generation, str(e))
            return
        if newer:
            self.app.call_from_thread(self._prepend, generation, newer)

    def _failed(self, generation: int, message: str) -> None:
        self.reading = False
        if generation == self.generation:
            self.query_one("#status", Static).update(noted("cannot read the Ledger: ", "red", message))

    def _add_page(self, generation: int, page: list[T]) -> None:
        self.reading = False
        if generation != self.generation:
            return
        self.exhausted = len(page) < PAGE
        known = {self.key(e) for e in self.items[-PAGE:]}
        page = [e for e in page if self.key(e) not in known]
        self.items += page
        self.draw(page, everything=False)
        self.show_status()

    def _prepend(self, generation: int, newer: list[T]) -> None:
        """Put newer items on top: at once when the cursor is on the top row, else when it gets there."""
        if generation != self.generation:
            return
        known = {self.key(e) for e in self.pending + self.items[: PAGE + 1]}
        self.pending = [e for e in newer if self.key(e) not in known] + self.pending
        if self.table.cursor_row <= 0:
            self.show_pending()
        self.show_status()

    def show_pending(self) -> None:
        """Redraw with the newest items on top, keeping one page (older rows reload as the cursor moves)."""
        if not self.pending:
            return
        self.items = (self.pending + self.items)[:PAGE]
        self.exhausted = False
        self.pending = []
        self.draw([], everything=True)
        self.table.move_cursor(row=0, animate=False)

    def poll(self) -> None:
        """Follow new items: ask for anything newer than the top row."""
        if not self.browse.following or self.reading or self.app.screen is not self:
            return
        top = self.pending[0] if self.pending else self.items[0] if self.items else None
        if top is not None:
            self.load_newer(self.generation, self.browse.filter, self.position(top))
        else:
            self.reload()

    @on(DataTable.RowHighlighted)
    def near_end(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row == 0 and self.pending:
            self.show_pending()
            self.show_status()
        elif self.items and not (self.exhausted or self.reading) and self.near_bottom():
            self.next_page(self.position(self.items[-1]))

    def near_bottom(self) -> bool:
        return self.row_index() >= len(self.items) - PAGE // 4

    def show_status(self) -> None:
        shown = f"{len(self.items):,} {self.NOUN} shown" + ("" if self.exhausted else "+")
        follow = "following new events" if self.browse.following else "paused"
        if self.pending:
            follow += f" · {len(self.pending):,} newer above (go to the top row)"
        loading = " · reading…" if self.reading else ""
        sort = self.browse.filter.sort or "newest"
        order = (
            "newest first" if sort == "newest" else f"{sort} first (the top {PAGE}; nothing newer follows)"
        )
        self.query_one("#status", Static).update(f"{shown} · {order} · {follow}{loading}")

    def show_understood(self, refused: str | None = None) -> None:
        label = self.query_one("#understood", Static)
        if refused:
            label.update(noted("not understood: ", "red", refused))
            return
        label.update(Text(shown(f"filter: {self.browse.filter.describe()}")))

    # -- keys -------------------------------------------------------------------------------------

    @on(Input.Submitted, "#filter")
    def apply_filter(self, event: Input.Submitted) -> None:
        self.browse.apply_question(event.value)

    @on(DataTable.RowSelected)
    def selected_row(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        raise NotImplementedError

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.browse.apply_question("")
        self.table.focus()

    def action_toggle_follow(self) -> None:
        self.browse.following = not self.browse.following
        self.show_status()

    def action_refresh(self) -> None:
        self.reload()
