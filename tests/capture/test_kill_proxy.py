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


def test_a_proxy_killed_while_its_writer_is_behind_says_what_it_could_not_record(
    tmp_path: Path, http_upstream: Upstream
) -> None:
    """The writer stops reading (SIGSTOP), so the pipe fills and answers go out after a short hold
    with their records still in the proxy: they are written down in the run's risk journal. The
    proxy is then killed (SIGKILL) and the writer resumed: it drains the pipe, and files the answered
    exchanges whose records died with the proxy as one `capture.lost` event (their ids its payload)
    and says so; every answered exchange is recorded or listed there, and `ledger verify` counts them."""
    from tests.capture.ledger_view import events_where, ledger_of
    from tests.capture.test_cli_capture import flightlog
    from tests.capture.test_kill_writer import writer_pid

    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    with live_proxy(tmp_path / "home", db, blobs_url=(tmp_path / "blobs").as_uri()) as proxy:
        writer = writer_pid(proxy.proc.pid)
        assert writer is not None
        os.kill(writer, signal.SIGSTOP)
        answered = []
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            for n in range(12):  # 200 KB answers: the 64 KiB pipe is full after the first
                assert _get(sock, f"{http_upstream.base}/bytes/200000?rid=r{n}") == 200
                answered.append(f"r{n}")
        os.kill(proxy.proc.pid, signal.SIGKILL)
        proxy.proc.wait()
        os.kill(writer, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while writer_pid(proxy.proc.pid) is not None or _alive(writer):
            assert time.monotonic() < deadline, "the writer did not finish"
            time.sleep(0.1)
    ledger = ledger_of(db, proxy.blobs_url)
    lost = events_where(ledger, "kind = 'capture.lost'", {})
    assert len(lost) == 1, lost
    lost_ids = (ledger.payload(lost[0].payload_sha256 or "") or b"").decode().split()
    recorded = recorded_ids(db, proxy.blobs_url)
    ledger.close()
    assert lost_ids and lost[0].error and lost[0].error.startswith(f"{len(lost_ids)} answered exchanges")
    named = {rid for rid in answered if rid in recorded}
    assert len(named) + len(lost_ids) == len(answered), (named, lost_ids)
    assert "were not recorded" in proxy.log(), proxy.log()[-2000:]
    verified = flightlog("ledger", "verify", "--ledger", db, "--blobs", proxy.blobs_url)
    assert f"not recorded: {len(lost_ids)} answered exchanges" in verified.stdout, verified.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
