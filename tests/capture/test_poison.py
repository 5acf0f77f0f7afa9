"""Hostile heads never stop recording: each is stored escaped and flagged, and traffic after it is too.

Raw sockets send what no polite client would (invalid UTF-8, lone bytes, NUL in the path, header
names and values, the identity headers) to the forward and the reverse listener, on SQLite and
PostgreSQL; then ordinary requests follow. Every exchange must be in the Ledger, the odd ones with
`escaped` set, their text columns reading back (through `storage.escaped.unescape`) to what mitmproxy
saw and their `head` holding the exact bytes.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import httpx

from storage.escaped import original_bytes, unescape
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

POISON_PATHS = (b"/a\xff\xfe", b"/nul\x00here", b"/mixed\xc3(\x00\xed\xa0\x80")
POISON_VALUES = (
    (b"X-Nul", b"a\x00b"),
    (b"X-Latin", b"caf\xe9 \xff\xfe"),
    (b"X-Flightlog-Agent", b"ag\x00\xff"),
)
BAD_NAME = ((b"X-Bad\xff", b"v"),)
"""mitmproxy (like plain mitmdump) refuses this header name with a 400: recorded with its error."""


def _raw(port: int, target: bytes, headers: tuple[tuple[bytes, bytes], ...], host: bytes) -> bytes:
    """Send one HTTP/1.1 request as exact bytes and read the answer's status line."""
    lines = [b"GET " + target + b" HTTP/1.1", b"Host: " + host, b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


def test_poison_then_ordinary_traffic_is_all_recorded(
    ledger_url: str, tmp_path: Path, http_upstream: Upstream
) -> None:
    """Invalid UTF-8 and NUL in the path and header values, an invalid header name, on the forward
    and the reverse listener: every exchange mitmproxy hands to its hooks is recorded (request and
    answer), the odd ones escaped and flagged with their exact head bytes, nothing is filed as
    unrecordable, and the ordinary requests after them are all recorded too (no retry loop)."""
    session = uuid.uuid4().hex.encode()
    up_host = f"127.0.0.1:{http_upstream.port}".encode()
    args = ["--mode", f"reverse:{http_upstream.base}@0"]
    with live_proxy(tmp_path / "home", ledger_url, args=args) as proxy:
        reverse = proxy.reverse_port("reverse:")
        for path in POISON_PATHS:
            for headers in ((), POISON_VALUES, BAD_NAME):
                marked = (*headers, (b"X-Flightlog-Session", session))
                assert _raw(reverse, path, marked, up_host).startswith(b"HTTP/1.1 ")
                assert _raw(proxy.port, b"http://" + up_host + path, marked, up_host).startswith(b"HTTP/1.1 ")
        poisoned_upstream = len(http_upstream.received)
        for i in range(20):
            r = httpx.get(
                f"{http_upstream.base}/fixed?i={i}",
                proxy=proxy.url,
                headers={"X-Flightlog-Session": session.decode()},
                timeout=10,
            )
            assert r.status_code == 200
        ledger = ledger_of(ledger_url, proxy.blobs_url)
        wait_for(ledger, "session = :s", {"s": session.decode()}, 2 * (poisoned_upstream + 20), timeout=20)
    log = proxy.log()
    assert "unavailable" not in log and "refused" not in log, log
    events = events_where(ledger, "session = :s", {"s": session.decode()})
    requests = [e for e in events if e.kind == "http.request"]
    answers = {e.action_id: e for e in events if e.kind == "http.response"}
    assert {e.action_id for e in requests} == set(answers)  # every request has its answer
    assert not events_where(ledger, "kind = :k", {"k": "capture.unrecordable"})
    ordinary = [e for e in requests if "/fixed" in (e.url or "")]
    assert len(ordinary) == 20 and not any(e.escaped for e in ordinary)
    odd = [e for e in requests if e not in ordinary]
    forwarded = [e for e in odd if answers[e.action_id].error is None]
    # Every one the upstream took (its parser refuses some with a 400 of its own) was answered and recorded.
    assert len(forwarded) >= poisoned_upstream >= 2 * len(POISON_PATHS)
    assert all(answers[e.action_id].status for e in forwarded)
    assert all(e.escaped for e in odd)
    for e in odd:
        assert e.url is not None
        path = original_bytes(e.url).split(up_host, 1)[1]
        assert path in POISON_PATHS and path in e.head  # the exact bytes, as the client sent them
    with_values = [e for e in odd if b"X-Nul: a\x00b" in e.head]
    assert len(with_values) >= len(POISON_PATHS)
    for e in with_values:
        assert b"X-Latin: caf\xe9 \xff\xfe" in e.head
        assert e.agent is not None and unescape(e.agent) == "ag\x00\xff"
    refused = [answers[e.action_id] for e in odd if b"X-Bad\xff" in e.head]
    assert refused and all("invalid header name" in (a.error or "") for a in refused)
    ledger.close()
