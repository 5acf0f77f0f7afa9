"""The event-by-event list: every Ledger row, newest first, as the browser showed it before exchanges.

`enter` opens the event whole (its metadata, exact head and body); `v` goes back to exchanges.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from storage.event_reads import cursor
from storage.events import StoredEvent
from storage.filters import Cursor, Filter
from tui import cells, rich_text
from tui.detail import DetailScreen
from tui.exchange_detail import ExchangeScreen
from tui.listing import PAGE, ListScreen


class EventsScreen(ListScreen[StoredEvent]):
    """Events one by one."""

    NOUN = "events"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("a", "open_action", "Exchange")]

    def fetch(self, flt: Filter, before: Cursor | None, after: Cursor | None) -> list[StoredEvent]:
        if after is not None:
            return self.source.newer(flt, after=after, limit=PAGE)
        return self.source.page(flt, limit=PAGE, before=before)

    def key(self, item: StoredEvent) -> str:
        return item.event_id

    def position(self, item: StoredEvent) -> Cursor:
        return cursor(item)

    def draw(self, added: list[StoredEvent], *, everything: bool) -> None:
        table = self.table
        if not table.columns:
            table.add_columns(*cells.COLUMNS)
        if everything:
            table.clear()
            added = self.items
        for event in added:
            table.add_row(*map(rich_text.cell, cells.row(event)), key=event.event_id)

    @property
    def events(self) -> list[StoredEvent]:
        return self.items

    def selected_event(self) -> StoredEvent | None:
        row = self.table.cursor_row
        if not self.items or row < 0 or row >= len(self.items):
            return None
        return self.items[row]

    def selected(self) -> StoredEvent | None:
        return self.selected_event()

    def export_all(self) -> list[str]:
        return list(dict.fromkeys(e.action_id for e in self.items))

    def action_open(self) -> None:
        event = self.selected_event()
        if event is not None:
            self.app.push_screen(DetailScreen(event))

    def action_open_action(self) -> None:
        event = self.selected_event()
        if event is not None:
            self.app.push_screen(ExchangeScreen(event.action_id))
