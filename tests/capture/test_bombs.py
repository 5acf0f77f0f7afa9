"""Decoding is bounded everywhere: a 1.6 KB brotli body that decodes to 1 GiB costs the writer a few
tens of MiB and a fraction of a second, is kept as it came, and its event says why it was not
searched decoded. Any local client can send one, as a request or as an answer."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import brotli
import pytest

from recording.redaction.redact import Redactor
from tests.capture.ledger_view import ledger_of, wait_for
from tests.capture.test_kill_writer import writer_pid
from tests.support.proxy import live_proxy

SECRET = "sk-very-secret-value-123"


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """1 GiB of zeros, brotli: 1,617 bytes."""
    compressor = brotli.Compressor(quality=5)
    zeros = b"\0" * (1 << 20)
    return b"".join(compressor.process(zeros) for _ in range(1024)) + compressor.finish()


def test_the_redactor_stops_at_its_cap_keeps_the_bytes_and_says_why(bomb: bytes) -> None:
    """With a secret configured, the body is decoded for the search up to its cap (64 MiB here, at
    100x its size a larger one), then searched as stored: returned unchanged, with the reason."""
    redactor = Redactor({"TOKEN": SECRET})
    out, names, problem = redactor.redact_body_noting(bomb, "br")
    assert out == bomb and not names
    assert problem and "cap of 67,108,864 bytes" in problem and "searched as stored" in problem
    small = brotli.compress(f'{{"key": "{SECRET}"}}'.encode())  # a secret inside a real body: found
    out, names, problem = redactor.redact_body_noting(small, "br")
    assert names == frozenset({"TOKEN"}) and problem is None and SECRET.encode() not in brotli.decompress(out)


@pytest.fixture
def bombing_upstream(bomb: bytes) -> Iterator[int]:
    """Answers `?answer` with the bomb as a brotli JSON body, anything else with `{}`."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(x.split(b":")[1])
                        for x in head.split(b"\r\n")
                        if x.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(body) < length:
                    body += conn.recv(65536)
                answer = bomb if b"?answer" in head.split(b"\r\n")[0] else b"{}"
                coding = b"Content-Encoding: br\r\n" if answer is bomb else b""
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + coding
                    + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(answer) + answer
                )  # fmt: skip

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _peak_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def test_a_bomb_request_and_a_bomb_answer_leave_the_writer_bounded(
    tmp_path: Path, bomb: bytes, bombing_upstream: int
) -> None:
    """Through a proxy with a secret configured, a bomb POSTed to a model path and a bomb answered
    to one: the writer's peak memory grows by under 64 MiB, both bodies are stored as they came, and
    each event says its body was searched as stored."""
    (tmp_path / "secrets.env").write_text(f"TOKEN={SECRET}\n")
    args = ["--secrets", str(tmp_path / "secrets.env")]
    with live_proxy(tmp_path / "home", f"sqlite:///{tmp_path / 'l.db'}", args=args) as proxy:
        writer = writer_pid(proxy.proc.pid)
        assert writer is not None
        time.sleep(0.5)
        idle = _peak_mib(writer)
        url = f"http://127.0.0.1:{bombing_upstream}/v1/chat/completions"
        common = ["curl", "-sS", "-o", "/dev/null", "-x", proxy.url, "-H", "Content-Type: application/json"]
        subprocess.run([*common, "-H", "Content-Encoding: br", "--data-binary", "@-", f"{url}?request"],
                       input=bomb, check=True, timeout=30)  # fmt: skip
        subprocess.run([*common, "--data", '{"model": "gpt-4o"}', f"{url}?answer"], check=True, timeout=30)
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        asked = wait_for(ledger, "kind = 'http.request' AND url LIKE '%?request'", {}, 1)[0]
        answered = wait_for(ledger, "kind = 'http.response' AND url LIKE '%?answer'", {}, 1)[0]
        peak = _peak_mib(writer)
    assert peak - idle < 64, (idle, peak)
    for event in (asked, answered):
        assert ledger.payload(event.payload_sha256 or "") == bomb and event.payload_state == "complete"
        assert event.error and event.error.startswith("The body was not searched for secrets decoded"), event
    assert answered.status == 200 and answered.model is None
    ledger.close()
