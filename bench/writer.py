"""The writer's CPU per request without the proxy: records like bench.capture's, into a real Ledger.

With several workers every core is busy, so the CPU a writer spends per request is CPU the proxies
lack (bench.workers prints the ceiling it leaves). Measured behind the proxy it comes with wrk's,
nginx's and the proxies' noise on a shared machine; here the same records (`GET /SIZE`, an nginx-like
200 answer of SIZE bytes, the same body each time, as the bench's upstream serves it) go straight into
`Writer._handle` and `Writer._flush` on this thread, with the proxy's own redaction, usage and prices,
into a fresh SQLite file or PostgreSQL database, and the process's CPU time is divided by the requests.

The batch size is what the flush interval makes of the load: 50 requests a batch is the default 50 ms
at 1,000 requests/s. The ids are the proxy's (`ordered`: each flow's id as the UUIDv7 of its creation,
recording.action_ids) or, for comparison, mitmproxy's own random UUID4 flow ids (`uuid4`, what
the proxy recorded before): a random id lands each event on its own page of the id indexes, which
costs the more, the more the Ledger already holds (`--before`). Printed per engine, ids and batch
size: the median CPU per request over the rounds, and its ratio to the first batch size and ids
(each commit rewrites the pages it touched into the WAL, so fewer, larger batches cost less per
request).

    python -m bench.writer [--requests N] [--rounds R] [--batches 50,100,200] [--ids ordered,uuid4]
                           [--before REQUESTS] [--engines sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import text

from bench._probe import probe_line
from bench._upstream import body
from bench.ledger import add_engine_options, engine_names, fresh_ledger
from recording.action_ids import action_id
from recording.capture_setup import processing
from recording.records import Exchange, Record, RequestRecord, ResponseRecord
from recording.writer.thread import Writer
from storage.ledger import open_ledger

ANSWER_HEAD = (
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 01 Dec 2026 21:00:00 GMT\r\n"
    b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n"
    b'Last-Modified: Tue, 01 Dec 2026 20:00:00 GMT\r\nConnection: keep-alive\r\nETag: "x"\r\n'
    b"Accept-Ranges: bytes\r\n\r\n"
)
"""The answer head nginx gives the bench's `GET /SIZE` (its size filled in)."""


IDS = ("ordered", "uuid4")


def exchange_records(requests: int, size: int, ids: str = "ordered") -> list[Record]:
    """A request and its answer for each of `requests` exchanges, with the proxy's ids (`ordered`) or
    mitmproxy's random flow ids (`uuid4`)."""
    payload = body(size)
    head = ANSWER_HEAD % size
    out: list[Record] = []
    for _ in range(requests):
        at = time.time()
        flow = str(uuid.uuid4())
        ex = Exchange(
            action_id(flow, at) if ids == "ordered" else flow,
            "out", "GET", f"http://127.0.0.1:8080/{size}", "127.0.0.1",
        )  # fmt: skip
        out.append(RequestRecord(ex, at, b"GET /%d HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n" % size, None))
        timing = (at, at + 0.0005, at + 0.001, None)
        out.append(
            ResponseRecord(ex, at + 0.001, 200, head, payload, "application/octet-stream", timing=timing)
        )
    return out


def cpu_per_request(writer: Writer, records: list[Record], per_batch: int) -> float:
    """CPU milliseconds per request to turn `records` into events and commit them, `per_batch`
    requests (two records each) a batch."""
    step = 2 * per_batch
    start = time.process_time()
    for k in range(0, len(records), step):
        for record in records[k : k + step]:
            writer._handle(record, None, time.monotonic())
        writer._flush()
    return (time.process_time() - start) / (len(records) / 2) * 1000


def run(url: str, blobs: Path, requests: int, per_batch: int, size: int, ids: str, before: int) -> float:
    """One fresh Ledger: `before` requests put in first (1,000 a batch, not measured), warmed up
    with 1,000 requests, then `requests` measured."""
    opts = SimpleNamespace(
        flightlog_secrets="", flightlog_secret_env=[], flightlog_redact_auth_headers=True, flightlog_prices=""
    )
    writer = Writer(
        lambda retry: open_ledger(url, blobs.as_uri(), retry_seconds=retry),
        processing(opts),
        collector="bench",
    )
    ledger = writer._ensure_ledger()  # opened as the writer thread opens it
    try:
        for first in range(0, before, 10_000):
            cpu_per_request(writer, exchange_records(min(10_000, before - first), size, ids), 1000)
        cpu_per_request(writer, exchange_records(1000, size, ids), per_batch)
        ms = cpu_per_request(writer, exchange_records(requests, size, ids), per_batch)
        with ledger.engine.connect() as conn:
            stored = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
        expected = 2 * (before + 1000 + requests)
        if stored != expected or writer.stats.unrecordable:
            raise RuntimeError(f"the writer stored {stored} events of {expected}: not a figure")
        return ms
    finally:
        ledger.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.writer", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="measured requests per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument(
        "--batches", default="50,100,200", help="requests per batch (the first is the baseline)"
    )
    parser.add_argument("--size", type=int, default=1024, help="answer size in bytes")
    parser.add_argument("--ids", default=",".join(IDS), help="ordered (the proxy's), uuid4 (mitmproxy's)")
    parser.add_argument("--before", type=int, default=0, help="requests already in each Ledger")
    add_engine_options(parser)
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.batches.split(",")]
    kinds = [k for k in args.ids.split(",") if k]
    if not kinds or set(kinds) - set(IDS):
        parser.error(f"--ids: one or more of {', '.join(IDS)}")
    engines = engine_names(args)
    home = Path(tempfile.mkdtemp(prefix="flightlog-bench-writer-"))
    saved_home = os.environ.get("FLIGHTLOG_HOME")
    os.environ["FLIGHTLOG_HOME"] = str(home)  # no operator's secrets or prices file is read
    print(probe_line("before"), flush=True)
    results: dict[tuple[str, str, int], list[float]] = {}
    try:
        for round_ in range(args.rounds):
            for engine in engines:
                for ids in kinds:
                    for per_batch in sizes:
                        with fresh_ledger(engine, args.pg, home) as (url, work):
                            ms = run(
                                url, work / "blobs", args.requests, per_batch, args.size, ids, args.before
                            )
                        results.setdefault((engine, ids, per_batch), []).append(ms)
                        line = f"round {round_ + 1} {engine:10} {ids:7} {per_batch:4} a batch: {ms:.3f} ms"
                        print(line, flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        if saved_home is None:
            os.environ.pop("FLIGHTLOG_HOME", None)
        else:
            os.environ["FLIGHTLOG_HOME"] = saved_home
    print(f"\nrequests already in each Ledger: {args.before:,}")
    print(f"{'engine':<11} {'ids':<8} {'requests/batch':>14} {'cpu-ms/request':>15} {'ratio':>6}")
    for engine in engines:
        base = statistics.median(results[(engine, kinds[0], sizes[0])])
        for ids in kinds:
            for per_batch in sizes:
                ms = statistics.median(results[(engine, ids, per_batch)])
                print(f"{engine:<11} {ids:<8} {per_batch:>14} {ms:>15.3f} {ms / base:>6.2f}")
    print(probe_line("after"))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
