"""Local upstream servers for the door's tests: one that keeps the exact bytes it received, one MCP server."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Received:
    """What a raw upstream got: the exact head and body bytes of each request, in order."""

    requests: list[tuple[bytes, bytes]] = field(default_factory=list)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = self.request.recv(65536)
            if not chunk:  # the client left mid-body: nothing to answer (b"" forever would spin)
                return
            body += chunk
        self.server.received.requests.append((head, body))
        answer = json.dumps(
            {"echo": body.decode("utf-8", "replace"), "target": head.split(b" ")[1].decode()}
        ).encode()
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Upstream: raw\r\n"
            + f"Content-Length: {len(answer)}\r\nConnection: close\r\n\r\n".encode()
            + answer
        )


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    received: Received


@contextmanager
def raw_upstream() -> Iterator[tuple[str, Received]]:
    """An HTTP/1.1 server on a free port that echoes the body and keeps every request's exact bytes."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.received = Received()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.received
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def mcp_upstream() -> Iterator[str]:
    """A real MCP server (official SDK, streamable HTTP) with one tool `add`; yields its /mcp URL."""
    import uvicorn
    from mcp.server import MCPServer

    server = MCPServer("door-test")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    port = free_port()
    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="error")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not runner.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        runner.should_exit = True
        thread.join(timeout=5)
