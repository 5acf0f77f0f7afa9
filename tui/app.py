"""`flightlog browse`: the Ledger in the terminal, exchanges first, newest first, following new events.

The first screen lists exchanges (one line per request with its status, size, duration, model, tokens
and cost); `v` switches to the events one by one. Both read keyset pages in worker threads (never on
the UI thread), so a ledger of a million events opens as fast as one of ten. A filter bar takes plain
words (`storage.questions.reading`) and shows the filter it understood, or why it refused.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.markup import MarkupError
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Input

from egress.approvals import AskBook
from formats.terminal_text import shown
from storage.errors import StorageError
from storage.filters import Filter
from storage.questions.reading import ask
from tui.asks import AsksScreen
from tui.counts import CountsScreen
from tui.detail import DetailScreen
from tui.dialogs import HelpScreen
from tui.events import EventsScreen
from tui.exchange_detail import ExchangeScreen
from tui.exchanges import ExchangesScreen
from tui.listing import PAGE, ListScreen
from tui.source import Source

__all__ = ["PAGE", "BrowseApp", "EventsScreen", "ExchangesScreen"]
View = Literal["exchanges", "events"]


def textual_markup(text: str) -> str:
    """The plain text a notice Textual wrote in its markup means (the markup as written when it is
    not markup after all)."""
    try:
        return Content.from_markup(text).plain
    except MarkupError:
        return text


class BrowseApp(App[None]):
    """The browser: give it a `Source`; `now` fixes the clock words like 'yesterday' are read against."""

    TITLE = "flightlog"
    SUB_TITLE = "the Ledger"
    CSS_PATH = "browse.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("A", "asks", "Held", show=False),
        # Ctrl-C quits, as the README and every terminal program promise (Textual binds it to a hint)
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, system=True),
    ]

    def __init__(
        self,
        source: Source,
        *,
        question: str = "",
        flt: Filter | None = None,
        follow_seconds: float | None = 1.0,
        now: Callable[[], datetime] | None = None,
        view: View = "exchanges",
        asks: AskBook | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.asks = asks
        """The held requests of an egress policy's `ask` rules (`A`), when the browser may answer them."""
        self.filter = flt or Filter()
        self.follow_seconds = follow_seconds
        self.following = bool(follow_seconds)
        self.now = now or (lambda: datetime.now(UTC))
        self.question = question
        self.view: View = view
        """Which list is the bottom of the stack."""
        self.group_by: str | None = None
        self.refused = self._read_question(question) if question.strip() else None
        """Why the first question could not be read (the list shows it under the filter bar)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notice as plain text on one line, whoever sends it (a screen's `notify` comes here):
        a notice may quote an action id a client chose or an error naming a recorded URL, and
        Textual reads a notice as markup (`[/x]` raised a MarkupError and closed the browser). No
        notice of ours uses markup; Textual's own (`Press [b]q[/b] to quit`) do, and are shown as
        the text their markup means (`textual_markup`), never as markup."""
        caller = sys._getframe(1).f_globals.get("__name__")
        if markup and caller == "textual.app":
            message, title = textual_markup(message), textual_markup(title)
        super().notify(shown(message), title=shown(title), severity=severity, timeout=timeout, markup=False)

    def get_default_screen(self) -> Screen[Any]:
        """A list is the bottom of the screen stack: escape always comes back to it."""
        return ExchangesScreen() if self.view == "exchanges" else EventsScreen()

    def on_mount(self) -> None:
        if self.group_by:
            self.action_counts()

    @property
    def list_screen(self) -> ListScreen[Any]:
        """The list on top (the other list may lie below it, after `v`)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ListScreen):
                return screen
        raise LookupError("no list is open")

    @property
    def events_screen(self) -> ListScreen[Any]:
        """The list at the bottom of the stack (exchanges or events)."""
        return self.list_screen

    def _read_question(self, words: str) -> str | None:
        """Read plain words into the filter; the refusal's text when they cannot be read."""
        try:
            question = ask(words, self.now(), self.source.known()) if words.strip() else None
        except StorageError as e:
            return str(e)
        self.question = words
        self.filter = question.filter if question else Filter()
        self.group_by = question.group_by if question else None
        return None

    def apply_question(self, words: str) -> bool:
        """Read plain words into the filter and start over; a refusal keeps the old filter (False)."""
        screen = self.list_screen
        refused = self._read_question(words)
        if refused is not None:
            screen.show_understood(refused=refused)
            return False
        screen.show_understood()
        screen.reload()
        if self.group_by:
            self.action_counts()
        return True

    def action_switch_view(self) -> None:
        """Exchanges ↔ events one by one, under the same filter: the other list opens above the first
        one, and `v` there comes back down to it (read again, in case the filter changed)."""
        lists = [s for s in self.screen_stack if isinstance(s, ListScreen)]
        while self.screen is not lists[-1]:
            self.pop_screen()
        if len(lists) > 1:
            self.pop_screen()
            lists[0].show_understood()
            lists[0].query_one("#filter", Input).value = self.question
            lists[0].reload()
            return
        self.push_screen(EventsScreen() if isinstance(lists[0], ExchangesScreen) else ExchangesScreen())

    def action_counts(self) -> None:
        self.push_screen(CountsScreen(self.filter))

    def action_asks(self) -> None:
        if self.asks is None:
            self.notify("no asks folder is connected to this browser", severity="warning")
        elif not isinstance(self.screen, AsksScreen):
            self.push_screen(AsksScreen(self.asks))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def on_detail_screen_action_wanted(self, message: DetailScreen.ActionWanted) -> None:
        """The event screen asked for its event's exchange: open it above the event."""
        self.push_screen(ExchangeScreen(message.action_id))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.list_screen
        yield SystemCommand(
            "Counts", "Events per hour; tokens and cost by model, tool, session", self.action_counts
        )
        yield SystemCommand(
            "Follow new events", "Start or stop following new events", main.action_toggle_follow
        )
        yield SystemCommand("Show errors", "Filter: status >= 400 or an error recorded", self._errors)
        yield SystemCommand("Clear the filter", "Show every event again", main.action_clear_filter)
        yield SystemCommand("Refresh", "Read the newest rows again", main.reload)
        yield SystemCommand("Exchanges or events", "Switch the list", self.action_switch_view)
        yield SystemCommand("Held requests", "Approve or refuse what an ask rule holds", self.action_asks)
        yield SystemCommand("Keys", "Every key of the browser", self.action_help)

    def _errors(self) -> None:
        self.list_screen.query_one("#filter", Input).value = "errors"
        self.apply_question("errors")
