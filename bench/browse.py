"""The browser's reads on a 1,000,000-event Ledger, SQLite beside PostgreSQL.

The events are generated inside the database (a recursive CTE on SQLite, generate_series on
PostgreSQL) through the migrated schema and its indexes, with no payloads: 30 days of traffic from
8 agents, 200 sessions, 6 models, 30 tools and 10 hosts, about 3% errors. Figures (median of runs):
  first screen   open the Ledger, start the TUI headless, until the first page of exchanges is in the
                 table (goal <= 1 s); `first screen/events` the same for the events list
  page           the first page (200 rows) of the unfiltered table (events; `exchanges page` grouped)
  filtered page  200 rows under a filter (several filters; the slowest is the one to read) (goal <= 300 ms)
  filtered exchanges  the same filters, 200 exchanges grouped by the database (goal <= 300 ms)
  deep page      200 rows from a keyset cursor half a million rows down
  counts/hour    counts by hour over every event, with tokens and cost (goal <= 500 ms)
  timeline/model the counts screen's per-model sparklines (events, tokens, cost per hour)
  open 5 MiB     open an exchange whose answer is a 5 MiB JSON body in the headless TUI, until its tabs
                 are drawn (goal <= 500 ms); `open a bodiless exchange` is the same screen with no payload,
                 what opening costs before any body
Each engine is measured with the indexes the migrations ship.

    python -m bench.browse [--events N] [--runs N] [--pg URL] [--only sqlite|postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench._pg import add_pg_option, scratch_database
from storage.event_reads import counts, select_events
from storage.events import Batch, Event
from storage.exchanges import select_exchanges
from storage.filters import Filter
from storage.ledger import Ledger, open_ledger
from storage.timeline import timeline

END = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
DAYS = 30

MIN_EVENTS = 20_000
"""The fewest events whose generated values include every filter's (agent-3 and s-3 start at event
15,000: `VALUES` changes agent and session every 5,000 events)."""

FILTERS: dict[str, Filter] = {
    "agent": Filter(agent="agent-3"),
    "errors+agent": Filter(agent="agent-3", status="errors"),
    "session": Filter(session="s-3"),
    "model+last day": Filter(model="gpt-4o", since=END - timedelta(days=1)),
    "host+url word": Filter(host="api.openai.com", url=("chat",)),
    "tool yesterday": Filter(tool="tool-7", since=END - timedelta(days=2), until=END - timedelta(days=1)),
}

HOST = "CASE (i / 2) % 10 WHEN 0 THEN 'api.openai.com' ELSE 'host' || ((i / 2) % 10) || '.example.com' END"
# Column values as SQL over the row number `i`, shared by both dialects (|| and % work in both).
VALUES = {
    "event_id": "'e' || i",
    "action_id": "'a' || (i / 2)",
    "collector": "'bench'",
    "seq": "i",
    "kind": "CASE WHEN i % 2 = 0 THEN 'http.request' ELSE 'http.response' END",
    "direction": "CASE WHEN i % 2 = 0 THEN 'out' ELSE 'in' END",
    "method": "CASE WHEN i % 10 < 7 THEN 'POST' ELSE 'GET' END",
    "url": f"'https://' || ({HOST})"
    " || (CASE WHEN (i / 2) % 3 = 0 THEN '/v1/chat/completions' ELSE '/v1/items/' || (i % 1000) END)",
    "host": HOST,
    "status": "CASE WHEN i % 2 = 0 THEN NULL WHEN (i / 2) % 37 = 0 THEN 500"
    " WHEN (i / 2) % 53 = 0 THEN 404 ELSE 200 END",
    "tool": "'tool-' || ((i / 2) % 30)",
    "session": "'s-' || ((i / 2) / 2500 % 200)",
    "task": "'t-' || ((i / 2) / 500 % 1000)",
    "turn": "'' || ((i / 2) % 12)",
    "agent": "'agent-' || ((i / 2) / 2500 % 8)",
    "model": "CASE (i / 2) % 6 WHEN 0 THEN 'gpt-4o' WHEN 1 THEN 'gpt-4o-mini' WHEN 2 THEN 'claude-sonnet'"
    " WHEN 3 THEN 'claude-haiku' WHEN 4 THEN 'llama-3' ELSE 'mistral-large' END",
    "tokens_in": "CASE WHEN i % 2 = 1 THEN 100 + (i % 900) ELSE NULL END",
    "tokens_out": "CASE WHEN i % 2 = 1 THEN 20 + (i % 300) ELSE NULL END",
    "cost_usd": "CASE WHEN i % 2 = 1 THEN (i % 1000) / 100000.0 ELSE NULL END",
    "payload_state": "'none'",
    "redacted": "'[]'",
    "error": "CASE WHEN i % 2 = 1 AND (i / 2) % 101 = 0 THEN 'upstream reset' ELSE NULL END",
}


def _sqlite_at(n: int) -> str:
    """SQLAlchemy's SQLite datetime text ('YYYY-MM-DD HH:MM:SS.ffffff') of event `i` of `n`."""
    t = f"({(END - timedelta(days=DAYS)).timestamp()} + i * {DAYS * 86400 / n})"
    micros = f"CAST(({t} - CAST({t} AS INTEGER)) * 1000000 AS INTEGER)"
    return f"strftime('%Y-%m-%d %H:%M:%S', {t}, 'unixepoch') || '.' || printf('%06d', {micros})"


def generate(ledger: Ledger, n: int) -> float:
    """Insert `n` events inside the database; returns the seconds it took."""
    t0 = time.perf_counter()
    columns = [*VALUES, "at", "head"]
    with ledger.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            values = [*VALUES.values(), _sqlite_at(n), "X'504f5354202f2048545450'"]
            sql = (
                f"WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < {n - 1}) "
                f"INSERT INTO events ({', '.join(columns)}) SELECT {', '.join(values)} FROM g"
            )
        else:
            start = END - timedelta(days=DAYS)
            at = f"TIMESTAMPTZ '{start.isoformat()}' + i * INTERVAL '{DAYS * 86400 / n} seconds'"
            values = [
                v.replace("'' || ", "CAST(").replace("% 12)", "% 12) AS TEXT)") if k == "turn" else v
                for k, v in VALUES.items()
            ]
            values = [*values, at, "'\\x504f5354202f2048545450'::bytea"]
            sql = (
                f"INSERT INTO events ({', '.join(columns)}) "
                f"SELECT {', '.join(values)} FROM generate_series(0, {n - 1}) AS i"
            )
        conn.execute(text(sql))
    with ledger.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Median seconds over `runs` (after one warm-up run), and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def first_screen(url: str, blobs: str, view: str = "exchanges") -> float:
    """Seconds from opening the Ledger to the first page shown in the headless TUI."""
    from tui.app import BrowseApp
    from tui.source import LedgerSource

    async def run() -> float:
        t0 = time.perf_counter()
        ledger = open_ledger(url, blobs)
        app = BrowseApp(LedgerSource(ledger), follow_seconds=None, now=lambda: END, view=view)  # type: ignore[arg-type]
        async with app.run_test(size=(120, 40)) as pilot:
            while not app.list_screen.items:
                await pilot.pause(0.005)
            elapsed = time.perf_counter() - t0
        ledger.close()
        return elapsed

    return asyncio.run(run())


BIG = 5 * 1024 * 1024


def add_big_answer(ledger: Ledger) -> str:
    """One exchange whose answer is a 5 MiB JSON body (in the blob store: above the inline limit)."""
    items = [{"id": i, "text": "x" * 90} for i in range(BIG // 110)]
    body = json.dumps(
        {"model": "gpt-4o", "choices": [{"message": {"content": "big"}}], "items": items}
    ).encode()
    at = END - timedelta(days=DAYS + 1)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"
    request = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "big"}]}'
    common = {
        "action_id": "big",
        "collector": "bench-big",
        "url": "https://api.openai.com/v1/chat/completions",
    }
    ledger.append(
        Batch(
            "bench-big",
            1,
            (
                Event(
                    event_id="big-request",
                    kind="http.request",
                    direction="out",
                    at=at,
                    seq=1,
                    method="POST",
                    head=head,
                    payload=request,
                    payload_state="complete",
                    **common,
                ),  # type: ignore[arg-type]
                Event(
                    event_id="big-response",
                    kind="http.response",
                    direction="in",
                    at=at + timedelta(seconds=2),
                    seq=2,
                    status=200,
                    head=b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n",
                    payload=body,
                    payload_state="complete",
                    **common,
                ),  # type: ignore[arg-type]
            ),
        )
    )
    return "big"


def open_exchange(url: str, blobs: str, action_id: str) -> float:
    """Seconds from pressing enter on an exchange to its tabs drawn (payloads read and rendered)."""
    from tui.app import BrowseApp
    from tui.exchange_detail import ExchangeScreen
    from tui.source import LedgerSource

    async def run() -> float:
        ledger = open_ledger(url, blobs)
        app = BrowseApp(LedgerSource(ledger), follow_seconds=None, now=lambda: END)
        async with app.run_test(size=(120, 40)) as pilot:
            while not app.list_screen.items:
                await pilot.pause(0.005)
            await pilot.pause(0.3)  # let the first screen finish drawing: the open is timed, not startup
            t0 = time.perf_counter()
            screen = ExchangeScreen(action_id, "answer")
            app.push_screen(screen)
            while not screen.loaded:
                await pilot.pause(0.002)
            if os.environ.get("BENCH_BROWSE_DEBUG"):
                print(f"  loaded after {time.perf_counter() - t0:.3f}s")
            await pilot.pause()
            elapsed = time.perf_counter() - t0
        ledger.close()
        return elapsed

    return asyncio.run(run())


class Figures(dict[str, float]):
    """The figures so far, each printed as it is measured (a shared server may go away mid-run)."""

    def __setitem__(self, name: str, seconds: float) -> None:
        super().__setitem__(name, seconds)
        print(f"  {name}: {seconds * 1000:,.1f} ms", flush=True)


def reads(url: str, blobs: str, n: int, runs: int) -> dict[str, float]:
    """Every read figure of the module docstring, on the ledger at `url`."""
    ledger = open_ledger(url, blobs)
    engine = ledger.engine
    out: dict[str, float] = Figures()
    try:
        out["first screen"] = statistics.median(first_screen(url, blobs) for _ in range(runs))
        out["first screen/events"] = statistics.median(
            first_screen(url, blobs, "events") for _ in range(runs)
        )
        out["page"], _ = timed(lambda: select_events(engine, Filter(), limit=200), runs)
        out["exchanges page"], _ = timed(lambda: select_exchanges(engine, Filter(), limit=200), runs)
        for label, flt in FILTERS.items():

            def page(flt: Filter = flt) -> list[Any]:
                return select_events(engine, flt, limit=200)

            def grouped(flt: Filter = flt) -> list[Any]:
                return select_exchanges(engine, flt, limit=200)

            out[f"filtered: {label}"], rows = timed(page, runs)
            assert rows, f"filter {label} matched nothing"
            out[f"filtered exchanges: {label}"], rows = timed(grouped, runs)
            assert rows, f"filter {label} matched no exchange"
        middle = select_events(engine, Filter(), limit=1, before=(END - timedelta(days=DAYS / 2), "~"))[0]
        deep = (middle.at, middle.event_id)
        out["deep page"], _ = timed(lambda: select_events(engine, Filter(), limit=200, before=deep), runs)
        out["counts/hour"], groups = timed(lambda: counts(engine, Filter(), "hour"), runs)
        assert sum(g.events for g in groups) == n + 2  # and the 5 MiB exchange
        out["counts/model"], _ = timed(lambda: counts(engine, Filter(), "model"), runs)
        out["timeline/model"], _ = timed(lambda: timeline(engine, Filter(), "model"), runs)
        out["open 5 MiB answer"] = statistics.median(open_exchange(url, blobs, "big") for _ in range(runs))
        out["open a bodiless exchange"] = statistics.median(
            open_exchange(url, blobs, "a0") for _ in range(runs)
        )
    finally:
        ledger.close()
    return out


def measure(name: str, url: str, blobs: str, n: int, runs: int) -> dict[str, dict[str, float]]:
    """Generate, then read with the indexes the migrations ship."""
    ledger = open_ledger(url, blobs)
    try:
        generated = generate(ledger, n)
        add_big_answer(ledger)
        with ledger.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        ledger.close()
    return {name: {"generate": generated, **reads(url, blobs, n, runs)}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.browse", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    add_pg_option(parser)
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    args = parser.parse_args(argv)
    if args.events < MIN_EVENTS:
        parser.error(
            f"--events {args.events:,}: at least {MIN_EVENTS:,}, so every filter it times finds rows"
        )

    print(f"{args.events:,} events, median of {args.runs} runs (ms)", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-browse-"))
    try:
        if args.only in (None, "sqlite"):
            url = f"sqlite:///{tmp / 'ledger.db'}"
            show(measure("sqlite", url, (tmp / "blobs").as_uri(), args.events, args.runs))
        if args.only in (None, "postgres"):
            with scratch_database(args.pg, "bench_browse") as url:
                show(measure("postgres", url, (tmp / "pgblobs").as_uri(), args.events, args.runs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def show(results: dict[str, dict[str, float]]) -> None:
    """One engine's figures beside the goals."""
    goals = {"first screen": 1.0, "first screen/events": 1.0, "counts/hour": 0.5, "open 5 MiB answer": 0.5}
    engines = list(results)
    print(f"\n{'':40}" + "".join(f"{e:>14}" for e in engines) + "   goal")
    for name in results[engines[0]]:
        goal = goals.get(name, 0.3 if name.startswith("filtered") else None)
        cells = "".join(f"{results[e][name] * 1000:>14,.1f}" for e in engines)
        print(f"{name:40}{cells}   {'' if goal is None else f'<= {goal * 1000:,.0f}'}", flush=True)


if __name__ == "__main__":
    main()
