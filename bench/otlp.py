"""OTLP spans from a generated Ledger: the batch export beside HAR, and the live follower's lag.

Workload: N model calls (OpenAI-shaped chat answers with usage, a quarter streamed), spread over
sessions of 10 calls, in a SQLite Ledger. Figures: calls/s exported as OTLP spans (to a local receiver
that only counts) beside calls/s exported as HAR from the same Ledger, with the ratio; then the
follower (the `proxy --otlp-endpoint` stream): the seconds from a batch's commit to its spans at the
receiver, and the follower's CPU per 1000 calls.

    python -m bench.otlp [--calls N]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from readback.export import export, export_otlp, plan
from readback.otlp_live import Follower
from readback.recorded import Selection
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

URL = "https://api.openai.com/v1/chat/completions"


def _answer(i: int) -> tuple[bytes, bytes]:
    if i % 4 == 0:
        chunks: list[dict[str, object]] = [
            {"id": f"c{i}", "model": "gpt-4o-mini", "choices": [{"delta": {"content": "w "}}]}
        ] * 20
        chunks.append({"id": f"c{i}", "choices": [{"delta": {}, "finish_reason": "stop"}]})
        chunks.append({"id": f"c{i}", "choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 20}})
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        return body, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"
    doc = {
        "id": f"c{i}",
        "model": "gpt-4o-mini",
        "choices": [{"message": {"role": "assistant", "content": "word " * 200}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 90,
            "completion_tokens": 200,
            "prompt_tokens_details": {"cached_tokens": 64},
        },
    }
    return json.dumps(doc).encode(), b"HTTP/1.1 200 OK\r\nContent-Type: application/json"


def calls(first: int, count: int, at: datetime) -> list[Event]:
    """`count` model calls (request and answer events), sessions of 10."""
    events: list[Event] = []
    for i in range(first, first + count):
        action = uuid.uuid4().hex
        body, head = _answer(i)
        common = {
            "action_id": action,
            "collector": "bench",
            "url": URL,
            "host": "api.openai.com",
            "method": "POST",
        }
        who = {"session": f"s{i // 10}", "agent": "bench", "model": "gpt-4o-mini"}
        request = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi " * 300}]})
        started = at + timedelta(seconds=i)
        events.append(
            Event(
                event_id=f"{action}:request",
                kind="http.request",
                direction="out",
                at=started,
                seq=2 * i,
                payload=request.encode(),
                payload_state="complete",
                **common,  # type: ignore[arg-type]
                **who,  # type: ignore[arg-type]
            )
        )
        events.append(
            Event(
                event_id=f"{action}:response",
                kind="http.response",
                direction="out",
                at=started + timedelta(milliseconds=400),
                seq=2 * i + 1,
                status=200,
                head=head,
                payload=body,
                payload_state="complete",
                tokens_in=90,
                tokens_out=20,
                last_byte_ms=400.0,
                **common,  # type: ignore[arg-type]
                **who,  # type: ignore[arg-type]
            )
        )
    return events


@contextmanager
def receiver() -> Iterator[tuple[str, list[float]]]:
    """A local OTLP/HTTP receiver that only notes when each request arrived."""
    arrived: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            arrived.append(time.perf_counter())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", arrived
    finally:
        server.shutdown()
        server.server_close()


def batch_rates(ledger: Ledger, count: int, url: str) -> tuple[float, float]:
    """(OTLP calls/s, HAR calls/s) over the whole Ledger."""
    ids = plan(ledger, Selection(), "otlp")
    began = time.perf_counter()
    export_otlp(ledger, ids, url)
    otlp_rate = count / (time.perf_counter() - began)
    began = time.perf_counter()
    export(ledger, "har", ids, io.BytesIO())
    return otlp_rate, count / (time.perf_counter() - began)


def live_lag(ledger: Ledger, url: str, arrived: list[float], rounds: int = 20) -> tuple[float, float, float]:
    """(median and worst seconds from a 10-call commit to its spans' arrival, follower CPU s/1000 calls),
    the follower polling as the proxy's does."""
    follower = Follower(ledger, url)
    lags: list[float] = []
    cpu = 0.0
    at = datetime(2026, 12, 1, tzinfo=UTC)
    stop = threading.Event()
    for r in range(rounds):
        ledger.append(Batch("bench", 10_000 + r, tuple(calls(100_000 + 10 * r, 10, at))))
        committed = time.perf_counter()
        before = len(arrived)
        began_cpu = time.thread_time()
        follower.round()
        cpu += time.thread_time() - began_cpu
        if len(arrived) > before:
            lags.append(arrived[-1] - committed)
        stop.wait(0.05)
    follower.finish()
    lags.sort()
    return lags[len(lags) // 2], lags[-1], cpu / (rounds * 10) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.otlp", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="flightlog-bench-otlp-"))
    try:
        ledger = open_ledger(f"sqlite:///{tmp / 'ledger.db'}", (tmp / "blobs").as_uri())
        at = datetime(2026, 11, 1, tzinfo=UTC)
        for first in range(0, args.calls, 500):
            ledger.append(
                Batch("bench", first // 500 + 1, tuple(calls(first, min(500, args.calls - first), at)))
            )
        with receiver() as (url, arrived):
            otlp_rate, har_rate = batch_rates(ledger, args.calls, url)
            median, worst, cpu = live_lag(ledger, url, arrived)
        ledger.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.calls} model calls in sessions of 10 (SQLite)")
    print(f"export otlp   {otlp_rate:>9,.0f} calls/s")
    print(f"export har    {har_rate:>9,.0f} calls/s   otlp/har {otlp_rate / har_rate:.2f}x")
    lag = f"median {median * 1000:.1f} ms, worst {worst * 1000:.1f} ms"
    print(f"live lag      {lag} (a commit to its spans at the receiver, one round; rounds are 0.5 s apart)")
    print(f"live cpu      {cpu:.2f} s per 1000 calls (follower process, not the proxy's)")


if __name__ == "__main__":
    main()
