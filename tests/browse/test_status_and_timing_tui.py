"""What the list says of a failed or a timed exchange, and what its detail says: the same thing.

The status column names the kind of failure (never a word cut from the error's sentence), the detail
shows the error whole; the timing tab's first byte and duration are the list's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from textual.widgets import DataTable

from addons.wire.flow_records import trailer_error
from addons.wire.outcomes import CLIENT_DISCONNECTED, CUT, STOPPING
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger
from tests.browse.sample import T0
from tests.browse.tui_support import make_app, settle
from tui.error_kinds import error_kind
from tui.exchange_cells import COLUMNS

pytestmark = pytest.mark.anyio
REFUSED = (
    "Server connection to ('127.0.0.1', 9) failed: Error connecting to '127.0.0.1': "
    "[Errno 111] Connection refused"
)

# (an error text as recorded, the kind the status column shows)
ERRORS = [
    (REFUSED, "refused"),
    (
        "Server connection to ('nosuch.invalid', 443) failed: Error connecting to 'nosuch.invalid': "
        "[Errno -2] Name or service not known",
        "dns",
    ),
    (
        "Server connection to ('10.255.255.1', 80) failed: Error connecting to '10.255.255.1': timed out",
        "timeout",
    ),
    ("Cannot connect to example.com:443: [Errno 111] Connection refused", "refused"),
    ("TLS handshake failed: certificate verify failed (self-signed certificate)", "tls"),
    ("timed out after 30 s", "timeout"),
    (STOPPING, "stopped"),
    (CUT, "stopped"),
    (f"{CUT} (120 bytes of it had gone to the client)", "stopped"),
    (CLIENT_DISCONNECTED, "client left"),
    ("The client left after 10 bytes of the answer; the proxy stopped before its end", "client left"),
    (
        "The upstream's answer was cut short before it was complete: 10 of 20 bytes arrived "
        "(peer closed connection without sending complete message body: incomplete chunked read)",
        "cut short",
    ),
    ("upstream reset", "reset"),
    ("[Errno 104] Connection reset by peer", "reset"),
    ("Connection killed.", "killed"),
    (trailer_error("X-Checksum"), "trailers"),
    ("HTTP/2 protocol error: invalid header", "protocol"),
    ("-32602: missing argument b", "-32602"),  # an MCP error: its JSON-RPC code
    ("no-gone-host: host gone.example is retired", "no-gone-host"),  # a policy refusal: its rule
    ("uses: spent", "uses"),  # a door refusal: its limit
    ("LIMIT: 3 calls a minute", "LIMIT"),
    ("something nobody foresaw", "error"),
]


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.parametrize(("error", "kind"), ERRORS)
def test_status_column_names_the_kind_of_failure(error: str, kind: str) -> None:
    """An error text becomes the kind of failure it tells of, short enough for the status column."""
    status = next(c for c in COLUMNS if c.key == "status")
    assert error_kind(error) == kind
    assert len(kind) <= status.cap


def pair(n: int, **answer: object) -> tuple[Event, Event]:
    url = f"https://api{n}.example.com/v1/things"
    common = {
        "action_id": f"x{n}",
        "collector": "test",
        "method": "GET",
        "url": url,
        "host": f"api{n}.example.com",
    }
    at = T0 + timedelta(minutes=n)
    request = Event(
        event_id=f"x{n}-request",
        kind="http.request",
        direction="out",
        at=at,
        seq=2 * n,
        **common,  # type: ignore[arg-type]
    )
    reply = Event(
        event_id=f"x{n}-response",
        kind="http.response",
        direction="in",
        at=at + timedelta(milliseconds=900),
        seq=2 * n + 1,
        **common,  # type: ignore[arg-type]
        **answer,  # type: ignore[arg-type]
    )
    return request, reply


@pytest.fixture
def failing_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A refused connection (no status) and an answer whose first and last bytes capture measured."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    events = (*pair(1, error=REFUSED), *pair(2, status=200, first_byte_ms=120.0, last_byte_ms=640.0))
    ledger.append(Batch("test", 1, events))
    yield ledger
    ledger.close()


def row_of(app: object, host: str) -> dict[str, str]:
    table = app.list_screen.query_one(DataTable)  # type: ignore[attr-defined]
    labels = [str(c.label).strip() for c in table.ordered_columns]
    for i in range(table.row_count):
        cells = [str(c).strip() for c in table.get_row_at(i)]
        if any(host in c for c in cells):
            return dict(zip(labels, cells, strict=True))
    raise AssertionError(f"no row for {host}")


def pane_text(screen: object, name: str) -> str:
    return "\n".join(str(w.render()) for w in screen.query(f"#pane-{name} Static"))  # type: ignore[attr-defined]


async def test_list_and_detail_say_the_same(failing_ledger: Ledger) -> None:
    """The refused exchange's status reads `refused` and its answer tab holds the whole error; the
    measured exchange's timing tab gives the first byte and duration the list shows."""
    app = make_app(failing_ledger)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        refused, measured = row_of(app, "api1.example.com"), row_of(app, "api2.example.com")
        assert refused["status"] == "refused"
        assert (measured["ttfb"], measured["dur"]) == ("120ms", "640ms")
        table = app.list_screen.query_one(DataTable)
        table.move_cursor(row=1)  # newest first: the refused exchange is second
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("2")
        assert f"error: {REFUSED}" in pane_text(app.screen, "answer")
        await pilot.press("escape")
        await settle(pilot)
        table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("5")
        timing = pane_text(app.screen, "timing")
        assert "first byte  120ms" in timing and "duration    640ms" in timing, timing
        await pilot.press("escape", "v")  # the events one by one say it as the exchanges do
        await settle(pilot)
        table = app.list_screen.query_one(DataTable)
        statuses = [str(table.get_row_at(i)[4]).strip() for i in range(table.row_count)]
        assert statuses.count("refused") == 1 and "ERR" not in statuses, statuses
