"""`run --replay` speed: replayed answers per second, and the latency replay adds to the recorded timing.

Workload: N recorded chat completions on a SQLite Ledger (tool-call-shaped JSON requests of ~2 KiB;
every third answer streamed as 12 SSE chunks, the others JSON of ~4 KiB), each recorded as taking
`--recorded-ms`. The live requests carry fresh tool-call ids, so the default strategies answer them by
`normalized` (the exact key misses first): the figure includes the cost of normalizing.

Figures:
- answers/s, one client and 4 concurrent clients, streams sent at once (the CI use);
- with `--timing recorded`: per request, wall time to the whole answer minus the recorded duration
  (the added latency: median and p95), JSON and streamed apart;
- Book.match alone (no proxy): microseconds per request by exact and by normalized.

    python -m bench.replay [--exchanges N] [--recorded-ms MS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from flightlog.replay_run import Plan, serving
from readback.match_book import Book
from readback.recorded import Selection, iter_exchanges, select_action_ids
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

URL = "http://api.bench.test/v1/chat/completions"


def request_body(i: int, call_id: str) -> bytes:
    messages = [
        {"role": "user", "content": f"question {i}: " + "what is the weather like " * 40},
        {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function"}]},
        {"role": "tool", "tool_call_id": call_id, "content": "18C and sunny"},
    ]
    return json.dumps({"model": "gpt-4o-mini", "messages": messages, "stream": i % 3 == 0}).encode()


def answer_body(i: int) -> tuple[bytes, bytes]:
    if i % 3 == 0:
        chunks = [
            b"data: " + json.dumps({"choices": [{"delta": {"content": f"w{k} " * 20}}]}).encode() + b"\n\n"
            for k in range(12)
        ]
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"
        return head, b"".join(chunks) + b"data: [DONE]\n\n"
    doc = {"choices": [{"message": {"role": "assistant", "content": "answer " * 550}}]}
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json", json.dumps(doc).encode()


def generate(ledger: Ledger, count: int, recorded_ms: int) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    events: list[Event] = []
    for i in range(count):
        action = uuid.uuid4().hex
        common = {
            "action_id": action,
            "collector": "bench",
            "method": "POST",
            "url": URL,
            "host": "api.bench.test",
        }
        at = start + timedelta(seconds=i)
        rhead, answer = answer_body(i)
        qhead = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.bench.test\r\nContent-Type: application/json"
        )
        events.append(
            Event(
                event_id=f"{action}:request", kind="http.request", direction="out", at=at, seq=2 * i,
                head=qhead, payload=request_body(i, f"call_rec{i:08d}xx"), payload_state="complete",
                **common,  # type: ignore[arg-type]
            )
        )  # fmt: skip
        events.append(
            Event(
                event_id=f"{action}:response", kind="http.response", direction="out",
                at=at + timedelta(milliseconds=recorded_ms), seq=2 * i + 1, status=200, head=rhead,
                payload=answer, payload_state="complete",
                **common,  # type: ignore[arg-type]
            )
        )  # fmt: skip
    ledger.append(Batch("bench", 1, tuple(events)))


def live(i: int) -> bytes:
    return request_body(i, f"call_live{uuid.uuid4().hex[:10]}")


def send_all(proxy: str, indices: list[int], workers: int) -> tuple[float, list[tuple[int, float]]]:
    """(seconds for all, [(index, seconds to the whole answer)]) through the proxy."""

    def one(client: httpx.Client, i: int) -> tuple[int, float]:
        began = time.perf_counter()
        answer = client.post(URL, content=live(i), headers={"Content-Type": "application/json"})
        answer.read()
        assert answer.status_code == 200, answer.text[:300]
        return i, time.perf_counter() - began

    began = time.perf_counter()
    clients = [httpx.Client(proxy=proxy, trust_env=False, timeout=60) for _ in range(workers)]
    try:
        with ThreadPoolExecutor(workers) as pool:
            timings = list(pool.map(lambda k: one(clients[k % workers], indices[k]), range(len(indices))))
    finally:
        for c in clients:
            c.close()
    return time.perf_counter() - began, timings


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=300)
    parser.add_argument("--recorded-ms", type=int, default=200)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-replay-"))
    try:
        ledger_url, blobs_url = f"sqlite:///{tmp / 'ledger.db'}", (tmp / "blobs").as_uri()
        ledger = open_ledger(ledger_url, blobs_url)
        generate(ledger, args.exchanges, args.recorded_ms)
        exchanges = list(
            iter_exchanges(ledger.engine, ledger.events, select_action_ids(ledger.engine, Selection()))
        )
        for strategies in (("exact",), ("normalized",)):
            book = Book(exchanges, ledger.payload, strategies)
            bodies = [
                request_body(i, f"call_rec{i:08d}xx") if strategies == ("exact",) else live(i)
                for i in range(args.exchanges)
            ]
            began = time.perf_counter()
            for body in bodies:
                assert book.match("POST", URL, body) is not None
            took = time.perf_counter() - began
            print(f"Book.match by {strategies[0]:10}: {took / len(bodies) * 1e6:8.0f} us/request")
        ledger.close()
        indices = list(range(args.exchanges))
        for workers in (1, 4):
            plan = Plan(ledger_url, blobs_url, Selection())
            with serving(plan, tmp / "conf") as server:
                proxy = f"http://127.0.0.1:{server.env()['HTTP_PROXY'].rsplit(':', 1)[1]}"
                took, _ = send_all(proxy, indices, workers)
            assert not server.report.misses, server.report.misses[:1]
            print(f"replay, {workers} client(s), no pacing : {len(indices) / took:8.0f} answers/s")
        sample = indices[: min(60, len(indices))]
        plan = Plan(ledger_url, blobs_url, Selection(), timing="recorded")
        with serving(plan, tmp / "conf") as server:
            proxy = f"http://127.0.0.1:{server.env()['HTTP_PROXY'].rsplit(':', 1)[1]}"
            _, timings = send_all(proxy, sample, 1)
        recorded = args.recorded_ms / 1000
        for kind, keep in (("JSON", lambda i: i % 3 != 0), ("stream", lambda i: i % 3 == 0)):
            added = [(t - recorded) * 1000 for i, t in timings if keep(i)]
            median, p95 = statistics.median(added), pct(added, 0.95)
            print(
                f"--timing recorded, {kind:6}: added latency over the recorded {args.recorded_ms} ms:"
                f" median {median:.1f} ms, p95 {p95:.1f} ms ({len(added)} requests)"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
