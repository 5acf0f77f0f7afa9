"""Recorded text in the browser: anyone may have written it, so it is shown, never obeyed.

A URL an agent was made to request and an agent name from a header reached the browser's tables as
plain strings, which Textual's DataTable reads as Rich markup: `[/x]` in a path stopped the browser
with a MarkupError (one odd request, and the reviewer's view of the Ledger was gone), `[b]` or
`[link=...]` styled or linked what the reviewer read, and escape sequences went to the terminal.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.widgets import DataTable, Input, Static, TextArea
from textual.widgets._header import HeaderTitle
from textual.widgets._toast import Toast

from storage.events import Batch
from storage.ledger import Ledger, open_ledger
from tests.browse.mcp_sample import stdio_events
from tests.browse.sample import NOW
from tests.browse.tui_support import make_app, settle
from tests.storage.factory import batch, event
from tests.support.terminal import obeyable
from tui.counts import CountsScreen
from tui.errors import TuiError
from tui.exchange_detail import ExchangeScreen
from tui.source import ToolInfo

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

URL = "https://api.example.com/[/x]/a\x1b]0;PWNED\x07[b]bold"
MODEL = "m[/y]\x1b[2J"
HEAD = b"POST /a\x1b]0;PWNED\x07 HTTP/1.1\r\nHost: api.example.com\r\nX-Agent: \x9b31mred"
BODY = b"plain \x1b[2Jtext\nline two"
AGENT = "[link=https://evil.example]a[/link]\x1b[2J"
TOOL = "t[/x]\x1b]0;PWNED\x07"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def hostile(tmp_path: Path) -> Any:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    at = NOW - timedelta(minutes=5)
    hostile = {"url": URL, "agent": AGENT, "model": MODEL, "session": MODEL, "head": HEAD}
    ledger.append(batch([event(i, BODY, at=at, **hostile) for i in (0, 1)]))
    yield ledger
    ledger.close()


def cells(screen: Any) -> list[str]:
    out = []
    for table in screen.query(DataTable):
        for i in range(table.row_count):
            out += [table._get_row_renderables(i).cells[j].plain for j in range(len(table.columns))]
    return out


@pytest.mark.parametrize("view", ["exchanges", "events"])
async def test_a_hostile_url_and_agent_are_shown_as_written(hostile: Any, view: str) -> None:
    """The list draws, the markup is shown as the brackets it is, and no control character is."""
    app = make_app(hostile, view=view)
    async with app.run_test(size=(200, 30)) as pilot:
        await settle(pilot)
        shown = "\n".join(cells(app.screen))
    assert app.return_code is None  # still running: no MarkupError
    assert "[/x]" in shown and "[b]bold" in shown and "[link=https://evil." in shown  # (a narrow column)
    assert "\\x1b]0;PWNED\\x07" in shown and "m[/y]\\x1b[2J" in shown
    assert not obeyable(shown, laid_out="\n")


async def test_a_hostile_model_is_shown_as_written_in_the_counts(hostile: Any) -> None:
    """The counts screen's tables (by model, tool and session) show the group's name as written."""
    app = make_app(hostile, view="events", question="events by model")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, CountsScreen)
        shown = "\n".join(cells(app.screen))
    assert shown.count("m[/y]\\x1b[2J") == 2  # by model, by session
    assert "\x1b" not in shown


async def test_an_exchanges_title_head_and_body_are_shown_as_written(hostile: Any) -> None:
    """The exchange's title (its URL), its exact head and its body: escapes shown, lines kept."""
    app = make_app(hostile)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ExchangeScreen)
        shown = ""
        for tab in "12":  # the request, the answer
            await pilot.press(tab)
            await settle(pilot)
            shown += "\n".join(str(w.render()) + str(w.border_title or "") for w in app.screen.query(Static))
    assert "/a\\x1b]0;PWNED\\x07[b]bold" in shown  # the title
    assert "X-Agent: \\x9b31mred" in shown and "plain \\x1b[2Jtext\nline two" in shown
    assert not obeyable(shown)


async def test_a_large_body_is_shown_as_written_too(tmp_path: Path) -> None:
    """A body over 32 KiB is drawn in a scrolling TextArea rather than a section: the same showing."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    large = b"\x1b]0;PWNED\x07 line\n" * 3000
    ledger.append(batch([event(i, large, at=NOW - timedelta(minutes=5)) for i in (0, 1)]))
    app = make_app(ledger)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            await pilot.press("1")
            await settle(pilot)
            areas = [a.text for a in app.screen.query(TextArea)]
    finally:
        ledger.close()
    assert areas and all(a.startswith("\\x1b]0;PWNED\\x07 line\n") and "\x1b" not in a for a in areas)


def drawn(app: App[None]) -> str:
    """Every Static of the current screen as drawn, each with its border's title (which Textual
    hands back as markup)."""
    titles = (Text.from_markup(w.border_title or "").plain for w in app.screen.query(Static))
    return "\n".join(f"{t}\n{w.render()}" for t, w in zip(titles, app.screen.query(Static), strict=True))


async def drawn_after(
    ledger: Ledger, steps: list[str], *, toasts: bool = False, **options: Any
) -> tuple[App[None], list[str]]:
    """Open the browser on `ledger` (closed after), and for each step press its keys (separated by
    spaces), let the screen settle and take what it draws (with its notices, if `toasts`)."""
    app = make_app(ledger, **options)
    taken = []
    try:
        async with app.run_test(size=(160, 60), notifications=toasts) as pilot:
            await settle(pilot)
            for step in steps:
                for key in step.split():
                    await pilot.press(key)
                await settle(pilot)
                notices = [str(t.render()) for t in app.screen.query(Toast)]
                taken.append("\n".join([drawn(app), *notices]))
    finally:
        ledger.close()
    return app, taken


async def test_a_typed_filter_is_echoed_as_written(hostile: Any) -> None:
    """The filter line echoes the question understood, and a refused one: a value holding `[/x]` (a
    URL or a name copied from a recorded one) stopped the browser with a MarkupError, and `[b]` was
    read as bold."""
    app = make_app(hostile)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        said = []
        for question in ('agent "[/x][b]y"', "agent a [/z]", "by [/x]"):  # quoted: asked anyway
            app.screen.query_one("#filter", Input).value = question
            await pilot.press("enter")
            await settle(pilot)
            said.append(str(app.screen.query_one("#understood", Static).render()))
    assert app.return_code is None
    assert "filter: agent=[/x][b]y" in said[0]
    assert "not understood: did not understand '[/z]'" in said[1]
    assert "not understood: " in said[2] and "[/x]" in said[2]


async def test_an_mcp_call_a_server_named_is_shown_as_written(tmp_path: Path) -> None:
    """A tool name and a result an MCP server chose: the call's section title (a border title, which
    Textual reads as markup, so `[/x]` closed the exchange screen) and its text."""
    call = {"name": TOOL, "arguments": {"q": "\x1b[2J"}}
    result = {"content": [{"type": "text", "text": "ok\x1b]0;PWNED\x07"}]}
    lines = [
        (0.0, "client", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}),
        (0.01, "server", {"jsonrpc": "2.0", "id": 1, "result": result}),
    ]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(Batch(collector="mcp-record:sess1", position=1, events=tuple(stdio_events(lines))))
    app = make_app(ledger)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            table = app.screen.query_one(DataTable)
            row = next(i for i in range(table.row_count) if "tools/call" in str(table.get_row_at(i)))
            table.move_cursor(row=row)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, ExchangeScreen)
            shown = drawn(app)
    finally:
        ledger.close()
    assert app.return_code is None
    assert "tools/call t[/x]\\x1b]0;PWNED\\x07 (id 1)" in shown
    assert '"text": "ok\\u001b]0;PWNED\\u0007"' in shown and not obeyable(shown)


async def test_a_directory_row_is_shown_as_written(tmp_path: Path) -> None:
    """The page `d` opens, and the event's Directory join: a tool named in the traffic and a row an
    agent may have written (its text reaches the Directory through the doors)."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(batch([event(i, b"{}", at=NOW - timedelta(minutes=5), tool=TOOL) for i in (0, 1)]))
    row = {"name": TOOL, "description": "Read [/x] \x1b]0;PWNED\x07"}
    info = ToolInfo(TOOL, row, {"curl": {"command": "curl \x1b[2J"}})
    app, (page, join) = await drawn_after(
        ledger, ["d", "escape enter"], view="events", directory=lambda name: info if name == TOOL else None
    )
    assert app.return_code is None
    for shown in (join, page):
        assert "Directory: t[/x]\\x1b]0;PWNED\\x07" in shown
        assert "description: Read [/x] \\x1b]0;PWNED\\x07" in shown and not obeyable(shown)


async def test_a_failure_notice_is_shown_as_written(hostile: Any) -> None:
    """A replay that cannot run says why in a notice, and the why names the recorded URL."""

    def replayer(action: str) -> str:
        raise TuiError(f"cannot reach {URL}")

    app = make_app(hostile, replayer=replayer)
    async with app.run_test(size=(160, 40), notifications=True) as pilot:  # toasts drawn, as for a user
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        toasts = "\n".join(str(t.render()) for t in app.screen.query(Toast))
    assert app.return_code is None
    assert "cannot reach https://api.example.com/[/x]/a\\x1b]0;PWNED\\x07[b]bold" in toasts


async def test_a_field_holding_a_line_break_stays_on_its_line(tmp_path: Path) -> None:
    """The event's field list: an upstream's error (or a header's value) holding a newline drew a
    line of its own that read as another field, here a forged model."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    forged = "boom\nmodel     gpt-forged"
    ledger.append(batch([event(i, b"{}", at=NOW - timedelta(minutes=5), error=forged) for i in (0, 1)]))
    app, (shown,) = await drawn_after(ledger, ["enter"], view="events")
    assert app.return_code is None
    assert "boom\\x0amodel     gpt-forged" in shown
    assert not any(line.startswith("model") and "gpt-forged" in line for line in shown.splitlines())


async def test_a_body_note_naming_a_recorded_header_is_shown_as_written(tmp_path: Path) -> None:
    """A body whose Content-Encoding the browser cannot undo is shown as kept, with a note naming
    the encoding: the header's value, which the upstream (or the client) wrote."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    head = b"POST /a HTTP/1.1\r\nHost: api.example.com\r\nContent-Encoding: x\x1b]0;PWNED\x07\x9b2K"
    ledger.append(batch([event(i, b"plain", at=NOW - timedelta(minutes=5), head=head) for i in (0, 1)]))
    app, (request,) = await drawn_after(ledger, ["enter 1"])
    assert app.return_code is None
    assert "content-encoding x\\x1b]0;pwned\\x07\\x9b2k is shown as kept" in request  # (lowercased)
    assert not obeyable(request)


async def test_an_mcp_call_id_a_client_chose_is_shown_as_written(tmp_path: Path) -> None:
    """A JSON-RPC id is the client's to choose and names the call's action (`mcp:S:call:c:ID`), which
    the exchange's header and the event's show."""
    rpc_id = "[/x]\x1b]0;PWNED\x07"
    lines = [
        (0.0, "client", {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {"name": "t"}}),
        (0.01, "server", {"jsonrpc": "2.0", "id": rpc_id, "result": {"content": []}}),
    ]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(Batch(collector="mcp-record:sess1", position=1, events=tuple(stdio_events(lines))))
    app, (exchange, _, listed) = await drawn_after(ledger, ["enter", "escape", "r"], toasts=True)
    assert app.return_code is None  # the header and the replay's notice read no markup
    assert '"[/x]\\u001b]0;PWNED\\u0007"' in exchange and not obeyable(exchange)
    assert 'replaying mcp:sess1:call:c:"[/x]\\u001b]0;PWNED\\u0007"' in listed


async def test_an_mcp_method_a_client_chose_is_shown_as_written_in_the_header(tmp_path: Path) -> None:
    """An MCP event's kind is `mcp.<method>`, and the method is the client's to choose: the event's
    screen names its kind in the header, which Textual draws as it is (ESC and all)."""
    method = "tools/x\x1b]0;PWNED\x07"
    lines = [
        (0.0, "client", {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}),
        (0.01, "server", {"jsonrpc": "2.0", "id": 1, "result": {}}),
    ]
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    ledger.append(Batch(collector="mcp-record:sess1", position=1, events=tuple(stdio_events(lines))))
    app = make_app(ledger, view="events")
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            table = app.screen.query_one(DataTable)
            rows = [str(table.get_row_at(i)) for i in range(table.row_count)]
            row = next(i for i, r in enumerate(rows) if "tools/x" in r and "result" not in r)  # the call
            table.move_cursor(row=row)
            await pilot.press("enter")
            await settle(pilot)
            header = "\n".join(str(w.render()) for w in app.screen.query(HeaderTitle))
    finally:
        ledger.close()
    assert "mcp.tools/x\\x1b]0;PWNED\\x07" in header and not obeyable(header)
