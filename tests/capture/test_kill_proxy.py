"""`kill -9` of the proxy right after it answered loses nothing it answered: the answer's records are
in the writer's kernel pipe before mitmproxy sends the answer (the response hook flushes them), and
the writer, in a session of its own, drains that pipe after the proxy is gone. Before, records
waited up to 5 ms on the proxy's side (the send delay) and died with it."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from tests.capture.test_kill_writer import recorded_ids
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

ANSWERS = 5


def _get(sock: socket.socket, url: str) -> int:
    """One GET through the forward proxy on a kept-alive connection; the answer's status, read whole."""
    sock.sendall(f"GET {url} HTTP/1.1\r\nHost: upstream\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or b"!"
        assert not data.endswith(b"!"), "the proxy closed the connection"
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ", 2)[1])


def test_kill_9_of_the_proxy_right_after_an_answer_loses_none_answered(
    ledger_url: str, tmp_path: Path, http_upstream: Upstream
) -> None:
    """Five answers on one connection, the proxy SIGKILLed the moment the last arrives: all five
    are recorded, on SQLite and PostgreSQL."""
    with live_proxy(tmp_path / "home", ledger_url, blobs_url=(tmp_path / "blobs").as_uri()) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            for n in range(ANSWERS):
                assert _get(sock, f"{http_upstream.base}/fixed?rid=k{n}") == 200
            os.kill(proxy.proc.pid, signal.SIGKILL)
        proxy.proc.wait()
    deadline = time.monotonic() + 30
    while True:  # the orphaned writer drains its pipe on its own schedule
        try:
            recorded = recorded_ids(ledger_url, proxy.blobs_url)
        except Exception:
            recorded = None  # the database is busy with the writer's last commit
        if recorded is not None and all(f"k{n}" in recorded for n in range(ANSWERS)):
            break
        assert time.monotonic() < deadline, (recorded, proxy.log()[-2000:])
        time.sleep(0.2)
    assert all(recorded[f"k{n}"] == 1 for n in range(ANSWERS))
