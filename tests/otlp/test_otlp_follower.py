"""The live stream's follower on a real Ledger (SQLite and PostgreSQL) and a real OTLP/HTTP receiver:
it sends what commits after it starts, a call whose answer commits later once the answer is in, and
nothing is lost while the receiver refuses."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from readback.otlp_live import Follower
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

_positions = itertools.count(1)


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()


@dataclass
class Receiver:
    url: str
    status: int = 200
    names: list[str] = field(default_factory=list)


@contextmanager
def receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver answering `status`; the names of the spans it took (answered 200)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    got = Receiver(f"http://127.0.0.1:{server.server_port}")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if got.status == 200:
                request = ExportTraceServiceRequest.FromString(body)
                got.names += [
                    s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
                ]
            self.send_response(got.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


def _event(action: str, kind: str, **columns: Any) -> Event:
    role = "request" if kind == "http.request" else "response"
    return Event(
        event_id=f"{action}:{role}",
        action_id=action,
        kind=kind,
        direction="out",
        at=datetime(2026, 12, 6, 12, tzinfo=UTC) + timedelta(milliseconds=10 if role == "response" else 0),
        collector="test",
        method="POST",
        url="http://models.test/v1/chat/completions",
        host="models.test",
        session="s1",
        agent="alpha",
        model="m",
        **columns,
    )


def _commit(ledger: Ledger, *events: Event) -> None:
    ledger.append(Batch("test", next(_positions), events))


def _call(ledger: Ledger, action: str) -> None:
    _commit(ledger, _event(action, "http.request"), _event(action, "http.response", status=200))


def test_it_sends_what_commits_after_it_starts_and_nothing_is_lost_while_the_receiver_refuses(
    ledger: Ledger,
) -> None:
    """A call committed before the follower started is not sent; one committed while the receiver
    answers 503 waits (one line said) and goes with the first round the receiver takes it."""
    with receiver() as got:
        _call(ledger, "before")
        follower = Follower(ledger, got.url, quiet=0)
        got.status = 503
        _call(ledger, "while-down")
        follower.round()
        assert got.names == [] and len(follower.waiting) == 2
        assert follower.down is not None and "answered 503" in follower.down
        got.status = 200
        follower.round()
        assert got.names == ["chat m", "invoke_agent alpha"]
        assert follower.down is None and not follower.waiting
        follower.finish()
    assert follower.sent == 2


def test_a_call_whose_answer_commits_later_is_sent_once_it_is_in(ledger: Ledger) -> None:
    """The request alone gives no span (its end is not known yet); its answer's commit completes it."""
    with receiver() as got:
        follower = Follower(ledger, got.url, quiet=3600)
        _commit(ledger, _event("a1", "http.request"))
        follower.round()
        assert got.names == []
        _commit(ledger, _event("a1", "http.response", status=200, tokens_in=3, tokens_out=4))
        follower.round()
        assert got.names == ["chat m"]  # the run's root waits for the run to be quiet
        follower.finish()
        assert got.names == ["chat m", "invoke_agent alpha"]
