"""Raw TCP through a CONNECT tunnel is judged as TCP: HTTP rules do not let it through, a `protocol =
"tcp"` rule with a port does.

A live proxy under `default = "deny"` with a rule allowing only `GET /status` on a local server (and
a `protocol = "tcp"` rule allowing one echo server's port). Through CONNECT: a GET /status inside the
tunnel passes; an SSH banner to the same host is refused (closed, the server's log holds nothing, a
`policy.refused` for TCP names the default); an SSH banner to the tcp-allowed port is echoed.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import LiveProxy, live_proxy


class Echo(socketserver.BaseRequestHandler):
    seen: ClassVar[list[bytes]] = []

    def handle(self) -> None:
        data = self.request.recv(4096)
        Echo.seen.append(data)
        if data.startswith(b"GET /status"):
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        elif data:
            self.request.sendall(b"echo:" + data)


@pytest.fixture
def servers() -> Iterator[tuple[int, int]]:
    made = [socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo) for _ in range(2)]
    for server in made:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    Echo.seen = []
    try:
        yield made[0].server_address[1], made[1].server_address[1]
    finally:
        for server in made:
            server.shutdown()
            server.server_close()


def tunnel(proxy: LiveProxy, port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.sendall(data)
        got = b""
        try:
            while chunk := sock.recv(4096):
                got += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return got


def test_raw_tcp_in_a_tunnel_needs_a_tcp_rule(tmp_path: Path, servers: tuple[int, int]) -> None:
    web, git = servers
    policy = tmp_path / "egress.toml"
    policy.write_text(
        'default = "deny"\n'
        '[[rule]]\nname = "status-only"\naction = "allow"\nhosts = ["127.0.0.1"]\nmethods = ["GET"]\n'
        'paths = ["/status"]\n'
        '[[rule]]\nname = "git-ssh"\naction = "allow"\nprotocol = "tcp"\nhosts = ["127.0.0.1"]\n'
        f"port = {git}\n"
    )
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with live_proxy(tmp_path / "home", ledger_url, args=["--policy", str(policy)]) as proxy:
        assert tunnel(proxy, web, b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").endswith(b"ok")
        assert tunnel(proxy, web, b"SSH-2.0-web\r\n") == b""
        assert tunnel(proxy, git, b"SSH-2.0-git\r\n") == b"echo:SSH-2.0-git\r\n"
        ledger = ledger_of(ledger_url, proxy.blobs_url)
        try:
            (refused,) = wait_for(ledger, "kind = 'policy.refused' AND method = 'TCP'", {}, 1)
        finally:
            ledger.close()
    assert refused.url == f"tcp://127.0.0.1:{web}" and refused.error.startswith("default: ")  # type: ignore[union-attr]
    assert b"SSH-2.0-web\r\n" not in Echo.seen and b"SSH-2.0-git\r\n" in Echo.seen
