"""A small real HTTP server for replay tests: it keeps every request it gets and answers from a script."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as the server received it: request line, header fields in order, body."""

    method: str
    path: str
    request_line: str
    fields: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer: status, header fields, and the body as one piece or as chunks (chunked framing)."""

    status: int = 200
    fields: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    chunks: list[bytes] | None = None


@dataclass
class Upstream:
    url: str
    seen: list[Seen]


@contextmanager
def upstream(answer: Callable[[Seen], Reply]) -> Iterator[Upstream]:
    """Serve on a free loopback port until the block ends."""
    seen: list[Seen] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            got = Seen(
                self.command,
                self.path,
                self.requestline,
                list(self.headers.items()),
                self.rfile.read(length) if length else b"",
            )
            seen.append(got)
            reply = answer(got)
            self.send_response(reply.status)
            for name, value in reply.fields:
                self.send_header(name, value)
            if reply.chunks is not None:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Upstream(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
