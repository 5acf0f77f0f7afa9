"""The exchange list, the browser's first screen: one line per request with its answer's figures.

Rows come from `storage.exchanges` (grouped by the database, keyset-paged like events). Columns are
laid out by `exchange_cells.layout` for the terminal's width and redrawn when it changes. An exchange
with messages under it (WebSocket, the door's upstream call, MCP) is marked `▸`; `space` expands it,
reading those events in a worker thread and showing them as indented rows beneath.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events, work
from textual.binding import Binding, BindingType

from storage.errors import StorageError
from storage.event_reads import cursor
from storage.events import StoredEvent
from storage.exchanges import Exchange, answers, opens
from storage.filters import Cursor, Filter
from tui import exchange_cells, rich_text
from tui.exchange_cells import Cell, Column
from tui.exchange_detail import ExchangeScreen
from tui.listing import PAGE, ListScreen

Line = tuple[Exchange, StoredEvent | None]
"""A table row: an exchange, or one of its inner events beneath it."""


class ExchangesScreen(ListScreen[Exchange]):
    """Exchanges, newest first."""

    NOUN = "exchanges"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "expand", "Expand"),
        Binding("right", "expand", "Expand", show=False),
        Binding("left", "collapse", "Collapse", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[Line] = []
        self.expanded: dict[str, list[StoredEvent]] = {}
        self.columns: list[tuple[Column, int]] = []

    def fetch(self, flt: Filter, before: Cursor | None, after: Cursor | None) -> list[Exchange]:
        return self.source.exchanges(flt, limit=PAGE, before=before, after=after)

    def key(self, item: Exchange) -> str:
        return item.action_id

    def position(self, item: Exchange) -> Cursor:
        return cursor(item.opening)

    # -- drawing ----------------------------------------------------------------------------------

    def _cells(self, line: Line) -> dict[str, Cell]:
        x, inner = line
        if inner is not None:
            drawn = exchange_cells.inner_cells(inner)
        else:
            drawn = exchange_cells.cells(x, x.action_id in self.expanded)
        return {key: rich_text.cell(value) for key, value in drawn.items()}

    def _lines(self, items: list[Exchange]) -> list[Line]:
        out: list[Line] = []
        for x in items:
            out.append((x, None))
            out += [(x, e) for e in self.expanded.get(x.action_id, [])]
        return out

    def draw(self, added: list[Exchange], *, everything: bool) -> None:
        """Append `added`, or redraw whole when asked or when the new rows need other column widths."""
        width = self.size.width or self.app.size.width
        lines = self._lines(self.items)
        columns = exchange_cells.layout([self._cells(line) for line in lines], width)
        if everything or columns != self.columns:
            self._redraw(lines, columns)
            return
        for line in self._lines(added):
            self._add(line)

    def _redraw(self, lines: list[Line], columns: list[tuple[Column, int]]) -> None:
        table = self.table
        row = table.cursor_row
        table.clear(columns=True)
        self.columns = columns
        self.lines = []
        for col, width in columns:
            table.add_column(
                exchange_cells.fit(col.header(width), width, col.right), width=width, key=col.key
            )
        for line in lines:
            self._add(line)
        if 0 <= row < table.row_count:
            table.move_cursor(row=row, animate=False)

    def _add(self, line: Line) -> None:
        cells = self._cells(line)
        x, inner = line
        key = x.action_id if inner is None else f"{x.action_id}/{inner.event_id}"
        self.table.add_row(*(exchange_cells.fit(cells[c.key], w, c.right) for c, w in self.columns), key=key)
        self.lines.append(line)

    def on_resize(self, event: events.Resize) -> None:
        if self.columns:
            self.draw([], everything=True)

    # -- what is under the cursor -----------------------------------------------------------------

    def line(self) -> Line | None:
        row = self.table.cursor_row
        return self.lines[row] if 0 <= row < len(self.lines) else None

    def row_index(self) -> int:
        line = self.line()
        return self.items.index(line[0]) if line else 0

    def selected(self) -> Exchange | None:
        line = self.line()
        return line[0] if line else None

    def selected_event(self) -> StoredEvent | None:
        line = self.line()
        return None if line is None else line[1] or line[0].opening

    def current_tool(self) -> str | None:
        line = self.line()
        if line is None:
            return None
        x, inner = line
        if inner is not None and inner.tool:
            return inner.tool
        return x.opening.tool or next((e.tool for e in self.expanded.get(x.action_id, []) if e.tool), None)

    def export_all(self) -> list[str]:
        return [x.action_id for x in self.items]

    # -- keys -------------------------------------------------------------------------------------

    def action_open(self) -> None:
        line = self.line()
        if line is None:
            return
        x, inner = line
        self.app.push_screen(ExchangeScreen(x.action_id, "inner" if inner is not None else "request"))

    def action_expand(self) -> None:
        x = self.selected()
        if x is None or not x.inner or x.action_id in self.expanded:
            return
        self.read_inner(x.action_id)

    def action_collapse(self) -> None:
        x = self.selected()
        if x is not None and self.expanded.pop(x.action_id, None) is not None:
            self.draw([], everything=True)
            self.table.move_cursor(row=self.lines.index((x, None)), animate=False)

    @work(thread=True, group="inner")
    def read_inner(self, action_id: str) -> None:
        try:
            events_ = self.source.action(action_id)
        except StorageError as e:
            self.app.call_from_thread(self.notify, str(e), severity="error")
            return
        inner = [e for e in events_ if not (opens(e) or answers(e))]
        self.app.call_from_thread(self._expanded, action_id, inner)

    def _expanded(self, action_id: str, inner: list[StoredEvent]) -> None:
        self.expanded[action_id] = inner
        self.draw([], everything=True)
