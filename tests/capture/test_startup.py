"""Start-up: the writer and the relay run before the port takes a connection, and each proxy on a
host records under its own collector id, the same one again after a restart."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.gates import new_key, open_gate, opened_in_time
from tests.support.ports import free_block
from tests.support.processes import spawn, stop_group
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream


def test_a_stream_on_the_first_connection_is_read_to_its_end(tmp_path: Path, http_upstream: Upstream) -> None:
    """A client that connects the moment the port opens and leaves after the first event of an SSE
    answer: its connection is already held by flightlog's listener, so the answer is read to its end
    (complete, all 5 events, the client's leaving said) instead of mitmproxy cutting it. On a fresh
    home (the CA made at this start) the connection is served, not cut: mitmproxy's CA is loaded
    before the port opens (it loaded it after, and a request in between stopped the proxy on
    `certstore` None, 5 runs in 8 here). The upstream sends the other four events only once the
    client has left (a gate, not a pause): the leaving is in the record whatever the machine's load."""
    port = free_block()
    home = tmp_path / "home"
    env = {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / 'l.db'}"}
    env["FLIGHTLOG_BLOBS"] = (tmp_path / "blobs").as_uri()
    import os

    log = (tmp_path / "proxy.log").open("wb")
    proc = spawn(
        [sys.executable, "-m", "flightlog", "proxy", "--listen", f"127.0.0.1:{port}"],
        env={**{k: v for k, v in os.environ.items() if "proxy" not in k.lower()}, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    session, gate = uuid.uuid4().hex, new_key()
    try:
        deadline = time.monotonic() + 30
        while True:  # connect the moment the port opens
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, (
                    tmp_path / "proxy.log"
                ).read_text()
                time.sleep(0.005)
        with sock:
            sock.sendall(
                f"GET {http_upstream.base}/sse/5?gate={gate} HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{http_upstream.port}\r\n"
                f"Accept: text/event-stream\r\nX-Flightlog-Session: {session}\r\n\r\n".encode()
            )
            got = b""
            while b"data: event 0" not in got:
                chunk = sock.recv(4096)
                assert chunk, f"the proxy closed the first connection after {got!r}"
                got += chunk
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        open_gate(gate)  # the client has left: now the upstream sends the other four while the proxy reads on
        ledger = ledger_of(env["FLIGHTLOG_LEDGER"], env["FLIGHTLOG_BLOBS"])
        found = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)
        assert found, (tmp_path / "proxy.log").read_text()
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        finally:
            stop_group(proc, grace=0)  # its writer too, if it outlived the proxy
    answer = found[0]
    assert opened_in_time(gate), "the first event never reached the client before the others"
    assert answer.payload_state == "complete" and answer.client_left_ms is not None, answer
    assert (answer.client_bytes or 0) < (answer.payload_size or 0), answer  # it left before the rest went
    assert answer.error and answer.error.startswith("The client left after"), answer.error
    assert ledger.payload(answer.payload_sha256 or "").count(b"data: event") == 5
    ledger.close()


def test_two_proxies_on_one_ledger_have_different_collectors_and_keep_them(
    tmp_path: Path, http_upstream: Upstream
) -> None:
    """Two proxies running side by side on one Ledger (each with its FLIGHTLOG_HOME: a home holds one
    proxy, `test_one_proxy.py`) record under two collector ids; the first, restarted alone, records
    under the id it had."""
    import httpx

    url = f"sqlite:///{tmp_path / 'l.db'}"
    home, other = tmp_path / "home", tmp_path / "other"

    def one_request(proxy_url: str, session: str) -> None:
        httpx.get(
            f"{http_upstream.base}/fixed",
            proxy=proxy_url,
            headers={"X-Flightlog-Session": session},
            timeout=10,
        )

    with live_proxy(home, url) as first, live_proxy(other, url) as second:
        one_request(first.url, "first")
        one_request(second.url, "second")
    with live_proxy(home, url) as again:
        one_request(again.url, "again")
    ledger = ledger_of(url, first.blobs_url)
    collectors = {
        s: {e.collector for e in wait_for(ledger, "session = :s", {"s": s}, 2)}
        for s in ("first", "second", "again")
    }
    ledger.close()
    assert all(len(c) == 1 for c in collectors.values()), collectors
    assert collectors["first"] != collectors["second"]
    assert collectors["again"] == collectors["first"]
