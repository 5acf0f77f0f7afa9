"""Requests held by an egress policy's `ask` rule, answered from the browser (`A` opens it).

The same folder `flightlog approve` answers through (`egress.approvals`): each line is one held request
(id, time left, who, what, the rule, a tool call's arguments); `y` lets the selected one through,
`n` refuses it. The list is read again twice a second, so a new request appears and an answered or
expired one goes without a key. The text comes from what an agent sent: it is shown as plain text,
never read as markup.
"""

from __future__ import annotations

import time
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from egress.approvals import AskBook, Pending
from egress.errors import AskError
from formats.terminal_text import shown

REFRESH = 0.5


class AsksScreen(Screen[None]):
    """The held requests, newest last; `y` approves the selected one, `n` refuses it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Approve"),
        Binding("n", "answer(False)", "Refuse"),
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, book: AskBook) -> None:
        super().__init__()
        self.book = book
        self.shown: list[Pending] = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        yield Static("", id="asks-status", markup=False)
        table: DataTable[str] = DataTable(id="asks", cursor_type="row")
        table.add_columns("id", "left", "who", "request", "rule")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "held requests"
        self.read()
        self.set_interval(REFRESH, self.read)

    def read(self) -> None:
        pending = self.book.pending()
        if [p.id for p in pending] == [p.id for p in self.shown]:
            return
        self.shown = pending
        table = self.query_one("#asks", DataTable)
        row = table.cursor_row
        table.clear()
        for item in pending:
            who = ",".join(f"{k}={v}" for k in ("agent", "session", "task") if (v := getattr(item, k)))
            what = item.target + (f" {item.arguments}" if item.arguments else "")
            left = f"{max(0.0, item.expires - time.time()):.0f}s"
            table.add_row(item.id, left, shown(who or "-"), shown(what), shown(item.rule), key=item.id)
        if pending:
            table.move_cursor(row=min(row, len(pending) - 1))
        status = f"{len(pending)} held: y approves, n refuses" if pending else "no request is waiting"
        self.query_one("#asks-status", Static).update(status)

    def action_answer(self, approve: bool) -> None:
        table = self.query_one("#asks", DataTable)
        if not self.shown or table.cursor_row < 0:
            return
        item = self.shown[min(table.cursor_row, len(self.shown) - 1)]
        try:
            self.book.answer(item.id, approve, by="flightlog browse")
        except AskError as e:
            self.notify(str(e), severity="warning")
        else:
            self.notify(f"{'approved' if approve else 'refused'} {item.id}: {item.target}")
        self.read()
