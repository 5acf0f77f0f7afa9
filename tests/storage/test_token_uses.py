"""A token's uses are spent atomically in the Ledger's database, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.engine import make_engine
from storage.events import Event
from storage.ledger import open_ledger
from storage.migrate import migrate
from storage.token_uses import TokenUses
from tests.storage.factory import legacy_append

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def race(book: TokenUses, identifier: str, limit: int, racers: int) -> list[int | None]:
    """`racers` threads, released together, each spending one use on its own connection."""
    got: list[int | None] = []
    start = threading.Barrier(racers)

    def one() -> None:
        start.wait()
        got.append(book.spend(identifier, limit, "call", "http", NOW))

    threads = [threading.Thread(target=one) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


@pytest.mark.parametrize("limit", [1, 3])
def test_racing_spenders_get_exactly_the_limit(ledger_url: str, tmp_path: Path, limit: int) -> None:
    """16 spenders at once on a token limited to `limit`: exactly `limit` get a use, numbered 1..limit,
    the rest None; two more engines on the same database (two proxies) find nothing left."""
    ledger = open_ledger(ledger_url, (tmp_path / "b").as_uri())
    book = TokenUses(ledger.engine)
    got = race(book, "tok-A", limit, 16)
    assert sorted(g for g in got if g is not None) == list(range(1, limit + 1))
    assert got.count(None) == 16 - limit
    other = TokenUses(make_engine(ledger_url))
    assert other.spend("tok-A", limit, "ledger", "mcp", NOW) is None
    assert (book.used("tok-A"), other.used("tok-A"), book.used("tok-B")) == (limit, limit, 0)
    other.engine.dispose()
    ledger.close()


def test_a_use_is_a_row_the_database_keeps(ledger_url: str, tmp_path: Path) -> None:
    """Each use is a row (token, use, at, verb, door); the rows refuse UPDATE and DELETE past flightlog."""
    ledger = open_ledger(ledger_url, (tmp_path / "b").as_uri())
    book = TokenUses(ledger.engine)
    assert book.spend("tok", 5, "write", "mcp", NOW) == 1
    with ledger.engine.connect() as conn:
        row = conn.execute(text("SELECT token, use, verb, door FROM token_uses")).one()
    assert tuple(row) == ("tok", 1, "write", "mcp")
    for sql in ("UPDATE token_uses SET use = 0", "DELETE FROM token_uses"):
        with pytest.raises(Exception, match="append-only"), ledger.engine.begin() as conn:
            conn.execute(text(sql))
    ledger.close()


def test_uses_counted_before_the_table_are_carried_over(ledger_url: str, tmp_path: Path) -> None:
    """A Ledger from before migration 0008 whose door calls named a token: those calls (not the
    refused one) become the token's first uses, so a spent token stays spent."""
    engine = make_engine(ledger_url)
    migrate(engine, "0007")
    events = []
    for n, refused in ((1, False), (2, True), (3, False)):
        common = {"action_id": f"d{n}", "at": NOW, "collector": "dispatch", "tool": "weather"}
        url = "flightlog:dispatch/http/weather?token=IDENT"
        events.append(
            Event(event_id=f"d{n}:call", kind="dispatch.call", direction="in", seq=0, url=url, **common)
        )  # type: ignore[arg-type]
        if refused:
            events.append(
                Event(event_id=f"d{n}:refused", kind="dispatch.refused", direction="out", seq=90, **common)
            )  # type: ignore[arg-type]
    legacy_append(engine, events, collector="dispatch")  # rows as an older flightlog wrote them
    engine.dispose()
    reopened = open_ledger(ledger_url, (tmp_path / "b").as_uri())
    book = TokenUses(reopened.engine)
    assert (book.used("IDENT"), book.used("OTHER")) == (2, 0)
    assert book.spend("IDENT", 2, "call", "http", NOW) is None
    assert book.spend("IDENT", 3, "call", "http", NOW) == 3
    reopened.close()
