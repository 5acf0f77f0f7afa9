"""Append throughput and stored/raw bytes for realistic batches, SQLite beside PostgreSQL.

Workload: 1,000-event batches; request/response bodies of 2-50 KiB of JSON; about 70% of the bodies
repeat one seen before (the same tool list, the same system prompt). Three figures per engine:
  rows     the event-row path alone (validation, the one-transaction insert, the batch chain): events/s
  unchained  the same with the chain's work stubbed out (no head lookup, no hashing), for its cost
  full     the whole append with payloads (hash, compress what is new, blobs, events, chain): events/s
and stored/raw = bytes the database and blob store hold / bytes the payloads had. The input events
are moved out of the collector's reach while appending (`gc.freeze`, as the writer process does with
what it imported): a writer holds one batch at a time, and full collections walking the bench's
20,000 held events cost one batch in twenty ~45 ms that no writer pays.

    python -m bench.ledger [--batches N] [--pg URL] [--engines sqlite,postgresql]
    FLIGHTLOG_BENCH_ENGINES=sqlite make bench BENCH_ARGS=ledger     # SQLite only
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from bench._pg import add_pg_option, scratch_database
from bench._probe import probe_line
from storage.chain import links as chain
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

WORDS = (
    "agent tool call model token stream answer request response ledger directory contract secret "
    "weather search invoice customer order shipment calendar meeting message summary report"
).split()


HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nContent-Type: application/json"


def body(rng: random.Random) -> bytes:
    """A chat-completion-like JSON body of 2-50 KiB."""
    target = rng.randint(2 * 1024, 50 * 1024)
    messages = []
    size = 0
    while size < target:
        content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
        messages.append({"role": rng.choice(["user", "assistant", "tool"]), "content": content})
        size += len(content) + 30
    doc = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "temperature": 0.2,
        "id": uuid.UUID(int=rng.getrandbits(128)).hex,
    }
    return json.dumps(doc).encode()


def batches(n: int, seed: int = 7) -> list[Batch]:
    rng = random.Random(seed)
    seen: list[bytes] = []
    t0 = datetime(2026, 11, 30, tzinfo=UTC)
    out = []
    for b in range(n):
        events = []
        for i in range(1000):
            k = b * 1000 + i
            if seen and rng.random() < 0.7:
                payload = rng.choice(seen)
            else:
                payload = body(rng)
                seen.append(payload)
                if len(seen) > 300:
                    seen.pop(0)
            events.append(
                Event(
                    event_id=f"bench-{k:09d}",
                    action_id=f"act-{k // 2:09d}",
                    kind="http.request" if k % 2 == 0 else "http.response",
                    direction="out",
                    at=t0 + timedelta(milliseconds=k),
                    collector="bench",
                    seq=k,
                    method="POST",
                    url="https://api.openai.com/v1/chat/completions",
                    host="api.openai.com",
                    status=None if k % 2 == 0 else 200,
                    session=f"s{k % 40}",
                    agent="alpha",
                    model="gpt-4o-mini",
                    tokens_in=rng.randint(100, 4000),
                    tokens_out=rng.randint(10, 800),
                    cost_usd=0.0012,
                    head=HEAD,
                    payload=payload,
                    payload_state="complete",
                )
            )
        out.append(Batch(collector="bench", position=b + 1, events=tuple(events)))
    return out


def stored_bytes(ledger: Ledger, blob_dir: Path) -> int:
    with ledger.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            db = conn.execute(
                text("SELECT pg_total_relation_size('events') + pg_total_relation_size('blobs')")
            ).scalar_one()
        else:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            db = Path(ledger.engine.url.database or "").stat().st_size
    files = sum(p.stat().st_size for p in blob_dir.rglob("*") if p.is_file())
    return int(db) + files


@contextmanager
def unchained() -> Iterator[None]:
    """Stub the chain's work out of the append path: no head lookup, no hashing (the batch row
    still gets a distinct index)."""
    real, real_leaves = chain.link, chain.written_leaves
    count = iter(range(1, 1 << 62))

    def stub(*args: object, **kwargs: object) -> chain.Link | None:
        return chain.Link(next(count), "", "[]", "", "")

    def no_leaves(rows: Sequence[object]) -> list[bytes]:
        return [b""] * len(rows)  # one (empty) leaf a row, unhashed: the writer pairs them with rows

    chain.link, chain.written_leaves = stub, no_leaves
    try:
        yield
    finally:
        chain.link, chain.written_leaves = real, real_leaves


def run(url: str, work: list[Batch], blob_dir: Path, strip: bool) -> tuple[float, float, float, float]:
    """events/s (median over batches), total events/s, stored/raw, and events per second of this
    process's CPU (on a shared machine the steadier figure; for SQLite it is all the work)."""
    ledger = open_ledger(url, blob_dir.as_uri())
    if strip:
        work = [
            replace(b, events=tuple(replace(e, payload=None, payload_state="none") for e in b.events))
            for b in work
        ]
    raw = sum(len(e.payload) for b in work for e in b.events if isinstance(e.payload, bytes))
    gc.collect()
    gc.freeze()  # the input is the bench's: a writer holds a batch, not 20,000 events (writer_child)
    rates = []
    start, cpu = time.perf_counter(), time.process_time()
    for b in work:
        t = time.perf_counter()
        ledger.append(b)
        rates.append(len(b.events) / (time.perf_counter() - t))
    count = sum(len(b.events) for b in work)
    total = count / (time.perf_counter() - start)
    per_cpu = count / max(time.process_time() - cpu, 1e-9)
    gc.unfreeze()
    ratio = stored_bytes(ledger, blob_dir) / raw if raw else float("nan")
    ledger.close()
    return statistics.median(rates), total, ratio, per_cpu


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """`--engines` and `--pg`, as every Ledger benchmark takes them."""
    parser.add_argument(
        "--engines",
        default=os.environ.get("FLIGHTLOG_BENCH_ENGINES", "sqlite,postgresql"),
        help="comma-separated: sqlite, postgresql (FLIGHTLOG_BENCH_ENGINES; sqlite alone needs no server)",
    )
    add_pg_option(parser)


def engine_names(args: argparse.Namespace) -> list[str]:
    """The engines `--engines` names, in its order."""
    return [e.strip() for e in args.engines.split(",") if e.strip()]


@contextmanager
def fresh_ledger(engine: str, admin: str, parent: Path | None = None) -> Iterator[tuple[str, Path]]:
    """An empty Ledger's URL and a scratch folder for its blobs (a SQLite file inside it, or a new
    database on `admin`'s PostgreSQL server); both are gone afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="flightlog-bench-", dir=parent))
    try:
        if engine == "sqlite":
            yield f"sqlite:///{folder / 'ledger.db'}", folder
        else:
            with scratch_database(admin) as url:
                yield url, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger")
    parser.add_argument("--batches", type=int, default=20)
    add_engine_options(parser)
    args = parser.parse_args(argv)
    print(probe_line("before"), flush=True)
    print(f"generating {args.batches} x 1,000 events (2-50 KiB JSON bodies, ~70% repeats) ...", flush=True)
    work = batches(args.batches)
    rows: list[tuple[str, str, float, float, float, float]] = []
    for engine in engine_names(args):
        for mode in ("rows", "unchained", "full"):
            with fresh_ledger(engine, args.pg) as (url, tmp):
                if mode == "unchained":
                    with unchained():
                        median, total, ratio, per_cpu = run(url, work, tmp / "blobs", strip=True)
                else:
                    median, total, ratio, per_cpu = run(url, work, tmp / "blobs", strip=(mode == "rows"))
            rows.append((engine, mode, median, total, ratio, per_cpu))
    header = f"{'engine':<11} {'path':<9} {'events/s (median batch)':>24} {'events/s (overall)':>19}"
    header += f" {'events/cpu-s (client)':>22}"
    print(f"{header} {'stored/raw':>11}")
    for engine, mode, median, total, ratio, per_cpu in rows:
        r = "-" if mode != "full" else f"{ratio:.3f}"
        print(f"{engine:<11} {mode:<9} {median:>24,.0f} {total:>19,.0f} {per_cpu:>22,.0f} {r:>11}")
    print("goal: >= 50,000 events/s for the event rows (with the chain) on each engine; stored/raw <= 0.3")
    print(probe_line("after"))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
