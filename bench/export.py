"""Export and serve-replay speed on a generated ledger, SQLite beside PostgreSQL.

Workload: N recorded exchanges (a JSON request of 1-8 KiB, a gzip JSON or SSE answer of 2-20 KiB).
Figures per engine: exchanges/s and output MB/s for each export format, and serve-replay answers/s
for one client sending the recorded requests back through the hermetic proxy.

    python -m bench.export [--exchanges N] [--pg URL]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
import random
import shutil
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from addons.serve_replay import Matcher, ServeReplay, build_master
from bench._pg import add_pg_option, create_database, drop_database
from readback.export import export, plan
from readback.recorded import Selection, iter_exchanges, select_action_ids
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

WORDS = "agent tool call model token stream answer request ledger contract weather invoice order".split()


def text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


def generate(ledger: Ledger, count: int, seed: int = 7) -> list[tuple[str, bytes]]:
    """Append `count` exchanges; return (url, request body) of each, for serve-replay to send back."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    sent: list[tuple[str, bytes]] = []
    batch: list[Event] = []
    for i in range(count):
        action = uuid.uuid4().hex
        url = f"http://api.bench.test/v1/items/{i % 50}"
        req = json.dumps({"i": i, "q": text(rng, rng.randint(1024, 8192))}).encode()
        streamed = i % 4 == 0
        if streamed:
            answer = b"".join(b"data: %s\n\n" % json.dumps({"d": text(rng, 200)}).encode() for _ in range(20))
            rhead = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
        else:
            answer = gzip.compress(json.dumps({"a": text(rng, rng.randint(2048, 20480))}).encode(), 1)
            rhead = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip"
        at = start + timedelta(seconds=i)
        common = {
            "action_id": action,
            "collector": "bench",
            "method": "POST",
            "url": url,
            "host": "api.bench.test",
        }
        qhead = f"POST /v1/items/{i % 50} HTTP/1.1\r\nHost: api.bench.test\r\nContent-Type: application/json"
        batch.append(
            Event(
                event_id=f"{action}:request",
                kind="http.request",
                direction="out",
                at=at,
                seq=2 * i,
                head=qhead.encode(),
                payload=req,
                payload_state="complete",
                **common,  # type: ignore[arg-type]
            )
        )
        batch.append(
            Event(
                event_id=f"{action}:response",
                kind="http.response",
                direction="out",
                at=at + timedelta(milliseconds=300),
                seq=2 * i + 1,
                status=200,
                head=rhead,
                payload=answer,
                payload_state="complete",
                **common,  # type: ignore[arg-type]
            )
        )
        sent.append((url, req))
        if len(batch) >= 1000:
            ledger.append(Batch("bench", i + 1, tuple(batch)))
            batch = []
    if batch:
        ledger.append(Batch("bench", count + 1, tuple(batch)))
    return sent


def time_exports(ledger: Ledger) -> dict[str, tuple[float, float]]:
    """Per format: items/s and output MB/s."""
    out: dict[str, tuple[float, float]] = {}
    for fmt in ("har", "mitmproxy", "jsonl"):
        buf = io.BytesIO()
        began = time.perf_counter()
        ids = plan(ledger, Selection(), fmt)
        count = export(ledger, fmt, ids, buf)
        took = time.perf_counter() - began
        out[fmt] = (count / took, buf.tell() / took / 1e6)
    return out


def time_serve_replay(ledger: Ledger, sent: list[tuple[str, bytes]], confdir: Path) -> float:
    """Answers per second for one client sending every recorded request back through serve-replay."""
    ids = select_action_ids(ledger.engine, Selection())
    addon = ServeReplay(Matcher(list(iter_exchanges(ledger.engine, ledger.events, ids))), ledger.payload)
    holder: dict[str, object] = {}

    def run() -> None:
        async def main() -> None:
            master = build_master(addon, "127.0.0.1", 0, str(confdir))
            holder["master"] = master
            await master.run()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    addon.ready.wait(30)
    port = addon.listening[0][1]
    try:
        with httpx.Client(proxy=f"http://127.0.0.1:{port}", trust_env=False) as client:
            began = time.perf_counter()
            for url, req in sent:
                response = client.post(url, content=req)
                assert response.status_code == 200, response.text
            took = time.perf_counter() - began
    finally:
        holder["master"].shutdown()  # type: ignore[attr-defined]
        thread.join(10)
    assert addon.report is not None and not addon.report.refused
    return len(sent) / took


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=2000)
    add_pg_option(parser)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-export-"))
    pg = create_database(args.pg, "bench_export")
    engines = {
        "sqlite": (f"sqlite:///{tmp / 'ledger.db'}", (tmp / "blobs").as_uri()),
        "postgres": (pg, (tmp / "pgblobs").as_uri()),
    }
    results: dict[str, dict[str, tuple[float, float]]] = {}
    serve: dict[str, float] = {}
    try:
        for engine, (url, blobs) in engines.items():
            ledger = open_ledger(url, blobs)
            sent = generate(ledger, args.exchanges)
            results[engine] = time_exports(ledger)
            serve[engine] = time_serve_replay(ledger, sent[: min(len(sent), 500)], tmp / "conf")
            ledger.close()
    finally:
        drop_database(pg, args.pg)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.exchanges} exchanges; figures: items/s (MB/s written)")
    print(f"{'':18}" + "".join(f"{e:>24}" for e in engines))
    for fmt in ("har", "mitmproxy", "jsonl"):
        cells = "".join(
            f"{f'{results[e][fmt][0]:,.0f}/s ({results[e][fmt][1]:.1f} MB/s)':>24}" for e in engines
        )
        print(f"{'export ' + fmt:18}{cells}")
    print(f"{'serve-replay':18}" + "".join(f"{f'{serve[e]:,.0f} answers/s':>24}" for e in engines))


if __name__ == "__main__":
    main()
