"""Counts under the current filter: events per hour as a sparkline, and tables by model, tool, session
with a sparkline over time per group for events, tokens and cost, so a spike is seen before it is read.

Each figure is summed from rows by the database (`storage.event_reads.counts`, `storage.timeline`), read in
a worker thread. Hours without events are drawn as zeros, so every x axis is time, not just busy hours,
and every group's sparklines share the same stretch of time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar, Final

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Sparkline, Static

from formats import terminal_text
from storage.errors import StorageError
from storage.filters import Filter, Group
from storage.timeline import Series, Timeline
from tui import cells, figures, rich_text
from tui.source import Source

TABLES: Final = ("model", "tool", "session")
SPARK: Final = 12
"""Cells of each group's sparklines (the hours are summed into this many)."""
MAX_HOURS: Final = 24 * 14
"""The sparkline shows at most the last two weeks of hours that have events."""


def hourly(groups: list[Group]) -> tuple[list[float], str]:
    """Events per hour with empty hours filled in, and a caption naming the span and the busiest hour."""
    known = {g.key: g.events for g in groups if g.key}
    if not known:
        return [], "no events"
    first = datetime.strptime(min(known), "%Y-%m-%dT%H:00Z")
    last = datetime.strptime(max(known), "%Y-%m-%dT%H:00Z")
    first = max(first, last - timedelta(hours=MAX_HOURS - 1))
    series: list[float] = []
    hour = first
    while hour <= last:
        series.append(float(known.get(hour.strftime("%Y-%m-%dT%H:00Z"), 0)))
        hour += timedelta(hours=1)
    busiest = max(known.items(), key=lambda kv: (kv[1], kv[0]))
    caption = (
        f"events per hour, {first:%Y-%m-%d %H:00} to {last:%Y-%m-%d %H:00} UTC · "
        f"{sum(int(v) for v in series):,} events · busiest {busiest[0]} with {busiest[1]:,}"
    )
    return series, caption


NO_SERIES: Final = Series((), (), ())


class CountsScreen(Screen[None]):
    """Counted views of the filter the events screen shows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "refresh", "Refresh"),
        Binding("q", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, flt: Filter) -> None:
        super().__init__()
        self.flt = flt

    @property
    def source(self) -> Source:
        return self.app.source  # type: ignore[attr-defined]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with VerticalScroll():
            yield Static(
                terminal_text.shown(f"filter: {self.flt.describe()}"), id="counts-filter", markup=False
            )
            yield Static("reading…", id="hour-caption", markup=False)
            yield Sparkline([], id="sparkline", summary_function=max)
            for by in TABLES:
                table: DataTable[object] = DataTable(id=f"by-{by}", classes="group-table", cursor_type="row")
                table.border_title = f"by {by}"
                yield table
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "counts"
        for by in TABLES:
            self.query_one(f"#by-{by}", DataTable).add_columns(
                by, "events", "trend", "tokens in→out", "trend", "cost", "trend"
            )
        self.read_counts(self.flt)

    def action_refresh(self) -> None:
        self.read_counts(self.flt)

    @work(thread=True, exclusive=True, group="counts")
    def read_counts(self, flt: Filter) -> None:
        try:
            views = {by: self.source.counts(flt, by) for by in ("hour", *TABLES)}
            lines = {by: self.source.timeline(flt, by) for by in TABLES}
        except StorageError as e:
            self.app.call_from_thread(
                self.query_one("#hour-caption", Static).update, terminal_text.shown(f"cannot count: {e}")
            )
            return
        self.app.call_from_thread(self._show, views, lines)

    def _show(self, views: dict[str, list[Group]], lines: dict[str, Timeline]) -> None:
        series, caption = hourly(views["hour"])
        self.query_one("#hour-caption", Static).update(caption)
        self.query_one("#sparkline", Sparkline).data = series
        spark = SPARK if self.app.size.width >= 110 else SPARK // 2
        for by in TABLES:
            table = self.query_one(f"#by-{by}", DataTable)
            table.clear()
            for g in views[by]:
                over = lines[by].groups.get(g.key, NO_SERIES)
                table.add_row(
                    rich_text.cell(g.key) if g.key is not None else "(none)",
                    f"{g.events:,}",
                    figures.spark(over.events, spark),
                    cells.tokens(g.tokens_in, g.tokens_out) if g.tokens_in or g.tokens_out else "",
                    figures.spark(over.tokens, spark) if g.tokens_in or g.tokens_out else "",
                    figures.spend(g.cost_usd, g.unpriced),
                    figures.spark(over.cost, spark) if g.cost_usd else "",
                )
