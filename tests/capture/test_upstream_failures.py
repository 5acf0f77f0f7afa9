"""Upstreams that fail after accepting the connection: reset, cut short, silent until a timeout.

Each is recorded as the answer event with its error, next to the request event, and the client still
gets its answer from mitmproxy (502) or its own timeout. The proxy runs with `tcp_timeout=2` so a
silent upstream is given up on within the test's time.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import LiveProxy, live_proxy


@contextmanager
def misbehaving(behaviour: str) -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server that reads one request head, then: `reset` (RST), `cut` (10 of 1,000 bytes, then
    close), `stall` (10 of 1,000 bytes, then nothing), `trailers` (a chunked answer with HTTP
    trailers) or `silent` (holds the connection open, answering nothing). Yields (port, heads read)."""
    server = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            heads.append(data)
            if behaviour == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            elif behaviour == "trailers":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                    b"Trailer: X-Checksum\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n"
                )
                conn.close()
            elif behaviour == "cut":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
                conn.close()
            elif behaviour == "stall":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
                held.append(conn)
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], heads
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveProxy, Ledger]]:
    base = tmp_path_factory.mktemp("failures")
    args = ["--set", "tcp_timeout=2"]
    with live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as running:
        ledger = ledger_of(running.ledger_url, running.blobs_url)
        yield running, ledger
        ledger.close()


def _fetch(running: LiveProxy, port: int, session: str, timeout: float = 15) -> httpx.Response | None:
    try:
        return httpx.get(
            f"http://127.0.0.1:{port}/thing",
            proxy=running.url,
            headers={"X-Flightlog-Session": session},
            timeout=timeout,
        )
    except httpx.HTTPError:
        return None


def test_upstream_reset_is_recorded_as_the_answer_with_its_error(proxy: tuple[LiveProxy, Ledger]) -> None:
    """The upstream resets the connection after reading the request: 502, and the error is recorded."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    with misbehaving("reset") as (port, heads):
        answer = _fetch(running, port, session)
        assert heads and heads[0].startswith(b"GET /thing HTTP/1.1")
    assert answer is not None and answer.status_code == 502
    request, response = wait_for(ledger, "session = :s", {"s": session}, 2)
    assert request.kind == "http.request" and response.kind == "http.response"
    assert response.status is None and response.error
    assert any(word in response.error.lower() for word in ("reset", "closed")), response.error


def test_answer_cut_short_is_recorded_partial_with_its_bytes(proxy: tuple[LiveProxy, Ledger]) -> None:
    """The upstream promises 1,000 bytes, sends 10 and closes (an answer mitmproxy buffers itself):
    the client gets mitmproxy's 502, and the answer event is `partial` with the 10 bytes that arrived
    and an error saying the upstream cut it short."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    with misbehaving("cut") as (port, _):
        answer = _fetch(running, port, session)
    assert answer is not None and answer.status_code == 502
    response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert response.status == 200 and response.payload_state == "partial"
    assert ledger.payload(response.payload_sha256 or "") == b"x" * 10
    assert response.error and response.error.startswith("The upstream's answer was cut short")
    assert "10 of 1000 bytes arrived" in response.error, response.error


def test_client_leaving_a_buffered_answer_keeps_the_bytes_that_arrived(
    proxy: tuple[LiveProxy, Ledger],
) -> None:
    """The upstream sends 10 of 1,000 bytes and stalls; the client gives up (0.5 s): the answer is
    `partial` with those 10 bytes and an error naming the client's leaving, not the upstream."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    with misbehaving("stall") as (port, _):
        assert _fetch(running, port, session, timeout=0.5) is None
        response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert response.status == 200 and response.payload_state == "partial"
    assert ledger.payload(response.payload_sha256 or "") == b"x" * 10
    assert response.error and response.error.startswith("The client disconnected"), response.error


def test_silent_upstream_times_out_and_is_recorded(proxy: tuple[LiveProxy, Ledger]) -> None:
    """An upstream that never answers: the proxy's timeout ends the exchange and the answer event
    says so; the client is not left hanging past it."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    with misbehaving("silent") as (port, heads):
        answer = _fetch(running, port, session, timeout=20)
        assert heads, "the request reached the upstream"
    assert answer is None or answer.status_code >= 500
    response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert response.status is None and response.error


def test_client_giving_up_on_a_slow_upstream_is_recorded(
    proxy: tuple[LiveProxy, Ledger], tmp_path: Path
) -> None:
    """The agent's own client times out first (0.5 s): the exchange is still two events, the answer
    carrying the disconnect."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    with misbehaving("silent") as (port, _):
        assert _fetch(running, port, session, timeout=0.5) is None
        response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert response.status is None and response.error and "disconnect" in response.error.lower()


def test_a_stream_request_is_answered_as_its_answer_says(proxy: tuple[LiveProxy, Ledger]) -> None:
    """A request asking for an event stream whose upstream answers with a length (1,000 bytes), sends
    10 and closes: the answer decides, so it is a buffered answer cut short like any other (`partial`,
    its 10 bytes kept, the error saying the upstream cut it short, nothing passed to the client)."""
    running, ledger = proxy
    session = uuid.uuid4().hex
    # The client sees the cut as plain mitmdump would show it (an error); the record is what counts.
    with misbehaving("cut") as (port, _), contextlib.suppress(httpx.HTTPError):
        httpx.get(
            f"http://127.0.0.1:{port}/thing",
            proxy=running.url,
            headers={"X-Flightlog-Session": session, "Accept": "text/event-stream"},
            timeout=15,
        )
    response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert response.payload_state == "partial" and response.status == 200
    assert ledger.payload(response.payload_sha256 or "") == b"x" * 10
    assert response.error and response.error.startswith("The upstream's answer was cut short"), response
    assert response.client_bytes == 0 and response.client_left_ms is None


def test_an_answer_with_trailers_fails_clearly_and_is_recorded_honestly(
    proxy: tuple[LiveProxy, Ledger],
) -> None:
    """mitmproxy cannot relay HTTP/1 trailers (plain mitmdump leaves the client waiting): through
    flightlog the client gets an error at once, not a hang, whatever the request asked for, and the
    answer event says it had trailers and names the ones announced."""
    running, ledger = proxy
    for accept in ("*/*", "text/event-stream"):
        session = uuid.uuid4().hex
        with misbehaving("trailers") as (port, _):
            try:
                answer = httpx.get(
                    f"http://127.0.0.1:{port}/thing",
                    proxy=running.url,
                    headers={"X-Flightlog-Session": session, "Accept": accept},
                    timeout=60,
                )
                assert answer.status_code >= 500, answer
            except httpx.HTTPError as e:  # an error, not the client's own timeout: it was not left waiting
                assert not isinstance(e, httpx.TimeoutException), e
        response = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
        assert response.error and "trailers" in response.error, response.error
        assert "Trailer: X-Checksum" in response.error, response.error
