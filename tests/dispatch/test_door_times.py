"""Each event of a door call carries the time it happened, so a door call and each of its upstream
exchanges has a duration (issue 44: the four events used to share one timestamp)."""

from __future__ import annotations

import socketserver
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from catalog.tool import Tool
from door.dispatch import Dispatcher
from storage.ledger import Ledger
from tests.dispatch.conftest import REFUSED, ROOT, SECRETS, token_for

DELAY = 0.4
"""How long the slow upstream waits before it answers (seconds)."""


class _Slow(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            head += chunk
        time.sleep(DELAY)
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            b"Connection: close\r\n\r\n{}"
        )


@pytest.fixture
def slow_upstream() -> Iterator[str]:
    """An HTTP server on a free port that answers `{}` after DELAY seconds."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def door(ledger: Ledger, base: str) -> Dispatcher:
    slow = Tool.from_frontmatter(
        {"name": "slow", "description": "Answers late.", "upstream": {"method": "GET", "url": base + "/late"}}
    )
    return Dispatcher({"slow": slow}.get, ledger, SECRETS, ROOT, REFUSED)


def test_a_door_call_has_a_duration_and_its_exchange_too(ledger: Ledger, slow_upstream: str) -> None:
    """Against an upstream that answers after 0.4 s: call, upstream request, upstream answer and reply
    are four distinct, ordered times; the answer comes at least 0.4 s after the request, and the reply
    at least 0.4 s after the call."""
    result = door(ledger, slow_upstream).dispatch({"tool": "slow", "args": {}}, token=token_for("slow"))
    assert result.status == 200, result.reply
    events = {e.kind: e.at for e in ledger.action(result.action_id)}
    call, sent = events["dispatch.call"], events["dispatch.upstream.request"]
    answered, reply = events["dispatch.upstream.response"], events["dispatch.reply"]
    assert call < sent < answered <= reply
    assert answered - sent >= timedelta(seconds=DELAY)
    assert reply - call >= timedelta(seconds=DELAY)
    assert reply - call < timedelta(seconds=DELAY + 5)


def test_times_are_measured_from_the_calls_own_clock(ledger: Ledger, slow_upstream: str) -> None:
    """A call checked against a given clock (`now`, as the limits read it) files its events from that
    instant on: the call at it, the rest after it by the time that really passed."""
    then = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    result = door(ledger, slow_upstream).dispatch(
        {"tool": "slow", "args": {}}, token=token_for("slow"), now=then
    )
    times = [e.at for e in ledger.action(result.action_id)]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert then <= times[0] < then + timedelta(seconds=1)
    assert times[-1] - then >= timedelta(seconds=DELAY)


def test_a_real_door_calls_upstream_exchange_is_a_span_under_its_tool_span(
    ledger: Ledger, slow_upstream: str
) -> None:
    """The door's own events, as it files them (`ACTION:call`, `ACTION:upstream.0.request`, ...), give
    the OTLP tree a client span for the upstream exchange under the call's `execute_tool` span, lasting
    at least the upstream's delay."""
    from readback.span_tree import SpanTree

    result = door(ledger, slow_upstream).dispatch({"tool": "slow", "args": {}}, token=token_for("slow"))
    tree = SpanTree(lambda _: b"")
    spans = tree.add(ledger.action(result.action_id)) + tree.finish()
    tool = next(s for s in spans if s.name == "execute_tool slow")
    upstream = next(s for s in spans if s.name == "GET")
    assert (upstream.parent_id, upstream.trace_id, upstream.kind) == (tool.span_id, tool.trace_id, "client")
    assert dict(upstream.attributes)["url.full"] == slow_upstream + "/late"
    assert upstream.end_ns - upstream.start_ns >= DELAY * 1e9


def test_a_call_is_stamped_when_it_came_to_the_door_not_when_the_checks_ended(
    ledger: Ledger, slow_upstream: str
) -> None:
    """A Directory slow to look the tool up: the call event carries the instant the call came in
    (the clock it was checked with), not the moment the checks ended after the slow lookup."""
    slow = Tool.from_frontmatter(
        {"name": "slow", "description": "Answers late.", "upstream": {"method": "GET", "url": slow_upstream}}
    )
    looked_up = threading.Event()

    def slow_lookup(name: str) -> Tool | None:
        time.sleep(0.2)  # a Directory read from a slow disk: the checks take a while
        looked_up.set()
        return {"slow": slow}.get(name)

    then = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    dispatcher = Dispatcher(slow_lookup, ledger, SECRETS, ROOT, REFUSED)
    result = dispatcher.dispatch({"tool": "slow", "args": {}}, token=token_for("slow"), now=then)
    assert looked_up.is_set() and result.status == 200, result.reply
    events = {e.kind: e.at for e in ledger.action(result.action_id)}
    assert events["dispatch.call"] == then
    assert events["dispatch.upstream.request"] > then
