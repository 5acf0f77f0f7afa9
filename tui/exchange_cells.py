"""One exchange as one line: which columns, how wide, and which go first when the terminal is narrow.

Widths come from the content of the rows shown (a model name is never cut to "gpt-"), a column empty
on every row is left out, and when the line is still wider than the terminal the least useful column
goes first (`DROP_ORDER`); host and path take what is left. Pure functions over `Exchange` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from rich.text import Text

from storage.events import StoredEvent
from storage.exchanges import STDIO_HOST, Exchange
from storage.kinds import MCP_PREFIX, MCP_START
from tui import figures
from tui.error_kinds import error_kind

Cell = str | Text


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    cap: int
    """The widest this column gets, however long its content."""
    right: bool = False
    short: str = ""
    """The header when the content is narrower than `label`."""

    def header(self, width: int) -> str:
        return self.label if len(self.label) <= width or not self.short else self.short


COLUMNS: Final = (
    Column("time", "time (UTC)", 14, short="time"),
    Column("who", "agent/session", 20, short="who"),
    Column("method", "method", 7, short="verb"),
    Column("status", "status", 12, short="st"),
    Column("target", "host and path", 200),
    Column("size", "size", 9, right=True),
    Column("duration", "dur", 7, right=True),
    Column("ttfb", "ttfb", 7, right=True),
    Column("model", "model", 28),
    Column("tokens", "tokens in→out", 17, right=True, short="tokens"),
    Column("cost", "cost", 14, right=True),
)
FLEX: Final = "target"
FLEX_MIN: Final = 16
DROP_ORDER: Final = ("ttfb", "size", "method", "who", "duration", "time", "tokens", "model")
"""Dropped in this order, first to last, until the line fits (status, target and cost always stay)."""
PADDING: Final = 2
"""What each column costs beyond its content (the table's cell padding, one each side)."""
RESERVED: Final = 2
"""Left for the vertical scrollbar."""


def status_text(status: int | None, error: str | None, answered: bool = False) -> Text:
    """The status code, or the kind of error (`reset`, `client left`: `error_kinds`) when the exchange
    failed with no error status; `ok` for an answer that has no status code (an MCP result over
    stdio). The error itself is shown whole in the exchange's detail."""
    if error:
        return Text(error_kind(error) if status is None or status < 400 else str(status), style="bold red")
    if status is None and answered:
        return Text("ok", style="green")
    if status is None:
        return Text("…", style="dim")
    style = "red" if status >= 500 else "yellow" if status >= 400 else "green"
    return Text(str(status), style=style)


DOOR: Final = "flightlog:dispatch/"


def target(url: str | None, host: str | None) -> str:
    """Host and path; a call through the dispatch door reads as the tool it called."""
    if url and url.startswith(DOOR):
        door, _, tool = url[len(DOOR) :].split("?", 1)[0].partition("/")
        return f"dispatch {tool} (door {door})"
    if not url:
        return host or ""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    return parts.netloc + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


STDIO: Final = "stdio:"


def mcp_target(method: str | None, tool: str | None, url: str | None, kind: str) -> str:
    """A stdio MCP call as what it called: `tools/call echo · python server.py` (the session: `session`)."""
    server = (url or "")[len(STDIO) :] if (url or "").startswith(STDIO) else url or ""
    what = "session" if kind == MCP_START else " ".join(x for x in (method, tool) if x)
    return f"{what} · {server}" if server else what


def who(agent: str | None, session: str | None) -> str:
    return "/".join(x for x in (agent, session) if x)


def cells(x: Exchange, expanded: bool = False) -> dict[str, Cell]:
    """The cells of one exchange, by column key."""
    o = x.opening
    t = x.timing
    mark = f"{'▾' if expanded else '▸'}{x.inner} " if x.inner else ""
    stdio = o.host == STDIO_HOST
    where = mcp_target(o.method, o.tool, o.url, o.kind) if stdio else target(o.url, o.host)
    if x.mcp_tool and not stdio:
        where = f"mcp {x.mcp_tool} · {where}"  # an MCP tools/call through the proxy: the tool first
    status = status_text(x.status, x.error, stdio and x.answer_at is not None)
    if stdio and o.kind == MCP_START and x.status is not None:  # a session: how the server exited
        status = Text(f"exit {x.status}", style="bold red" if x.status or x.error else "green")
    return {
        "time": o.at.strftime("%m-%d %H:%M:%S"),
        "who": who(o.agent, o.session),
        "method": "MCP" if stdio else o.method or "",
        "status": status + ("*" if x.answer_state == "partial" else ""),
        "target": mark + where,
        "size": figures.size(x.answer_size),
        "duration": figures.duration(t.duration_ms),
        "ttfb": figures.duration(t.ttfb_ms),
        "model": x.model or "",
        "tokens": figures.tokens(x.tokens_in, x.tokens_out),
        "cost": figures.cost(x.cost_usd),
    }


def inner_cells(e: StoredEvent) -> dict[str, Cell]:
    """An event under its exchange (a WebSocket message, the door's upstream call, an MCP message)."""
    arrow = "→" if e.direction == "out" else "←"
    kind = e.kind.removeprefix(MCP_PREFIX)  # an MCP message: `tools/call weather`, the tool before the cut
    what = f"   └ {arrow} {kind}" + (f" {e.tool}" if e.tool and not e.kind.startswith("http") else "")
    return {
        "time": e.at.strftime("%m-%d %H:%M:%S"),
        "who": who(e.agent, e.session),
        "method": e.method or "",
        "status": status_text(e.status, e.error) if e.status or e.error else Text(""),
        "target": what,
        "size": figures.size(e.payload_size),
        "duration": "",
        "ttfb": "",
        "model": e.model or "",
        "tokens": figures.tokens(e.tokens_in, e.tokens_out),
        "cost": figures.cost(e.cost_usd),
    }


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(cell)


def layout(rows: Sequence[dict[str, Cell]], width: int) -> list[tuple[Column, int]]:
    """The columns to show at `width` terminal cells, each with its width."""
    widths: dict[str, int] = {}
    for col in COLUMNS:
        content = max((_width(r[col.key]) for r in rows), default=0)
        if content == 0 and col.key != FLEX and col.key not in ("status", "cost"):
            continue
        widths[col.key] = min(col.cap, max(len(col.short or col.label), content))
    budget = width - RESERVED

    def total() -> int:
        fixed = sum(w + PADDING for k, w in widths.items() if k != FLEX)
        return fixed + FLEX_MIN + PADDING

    for key in DROP_ORDER:
        if total() <= budget:
            break
        widths.pop(key, None)
    fixed = sum(w + PADDING for k, w in widths.items() if k != FLEX)
    widths[FLEX] = max(FLEX_MIN, min(widths[FLEX], budget - fixed - PADDING))
    return [(col, widths[col.key]) for col in COLUMNS if col.key in widths]


def fit(cell: Cell, width: int, right: bool = False) -> Cell:
    """A cell cut to `width` with an ellipsis (never silently), right-aligned for figures."""
    if isinstance(cell, Text):
        if cell.cell_len > width:
            cell = cell.copy()
            cell.truncate(width, overflow="ellipsis")
        if right:
            cell = cell.copy()
            cell.align("right", width)
        return cell
    if len(cell) > width:
        cell = cell[: max(0, width - 1)] + "…"
    return cell.rjust(width) if right else cell
