"""Upstreams that keep exactly what they received, for the differential suite (flightlog vs mitmdump).

`h1_upstream()` speaks HTTP/1.1 on raw sockets (plain, or TLS offering only `http/1.1`) and keeps
each request's wire bytes (head and body as framed); `h2_upstream()` speaks HTTP/2 over TLS (ALPN
`h2`) and keeps each request's decoded header list and body. Both answer from one table of
shapes (`ANSWERS`), so the same request shape means the same answer whichever proxy is in front.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import brotli

from tests.support import gates
from tests.support.upstream import self_signed

Fields = list[tuple[bytes, bytes]]
BODY = b'{"answer": "hello world", "n": 42}'


@dataclass(frozen=True)
class Answer:
    status: int
    fields: tuple[tuple[bytes, bytes], ...]
    chunks: tuple[bytes, ...] = ()
    chunked: bool = False
    delay: float = 0.0
    cut: bool = False
    """Close the connection after the chunks, whatever the head promised (a short body)."""
    trailers: tuple[tuple[bytes, bytes], ...] = ()
    """HTTP trailers after the last chunk (HTTP/1.1: chunked; HTTP/2: a HEADERS frame)."""
    raw: tuple[bytes, ...] = ()
    """HTTP/1.1 only: these exact bytes instead of a built answer (odd framing), `delay` apart, then
    the connection closes (HTTP/2 answers `status` with the fields and chunks instead)."""


def _fixed(status: int, body: bytes, *fields: tuple[bytes, bytes]) -> Answer:
    return Answer(status, (*fields, (b"Content-Length", str(len(body)).encode())), (body,) if body else ())


ANSWERS: dict[str, Answer] = {
    "/fixed": _fixed(200, BODY, (b"Content-Type", b"application/json"), (b"X-Mixed-CASE", b"v")),
    "/empty": _fixed(200, b"", (b"Content-Type", b"text/plain")),
    "/chunked": Answer(200, ((b"Content-Type", b"text/plain"),), (b"one ", b"two ", b"three"), chunked=True),
    "/204": Answer(204, ((b"X-Note", b"nothing"),)),
    "/304": Answer(304, ((b"ETag", b'"abc"'),)),
    "/head": _fixed(200, b"x" * 1234, (b"Content-Type", b"text/plain")),
    "/gzip": _fixed(200, gzip.compress(BODY, mtime=0), (b"Content-Encoding", b"gzip")),
    "/br": _fixed(200, brotli.compress(BODY), (b"Content-Encoding", b"br")),
    "/sse": Answer(
        200,
        ((b"Content-Type", b"text/event-stream"), (b"Cache-Control", b"no-cache")),
        tuple(b"id: %d\ndata: event %d\n\n" % (i, i) for i in range(5)),
        chunked=True,
        delay=0.02,
    ),
    "/trailers": Answer(
        200,
        ((b"Content-Type", b"text/plain"), (b"Trailer", b"X-Checksum")),
        (b"hello ", b"trailers"),
        chunked=True,
        trailers=((b"X-Checksum", b"abc123"),),
    ),
    "/short": Answer(
        200, ((b"Content-Type", b"text/plain"), (b"Content-Length", b"1000")), (b"x" * 10,), cut=True
    ),
    "/sse-slow": Answer(
        200,
        ((b"Content-Type", b"text/event-stream"), (b"Cache-Control", b"no-cache")),
        tuple(b'data: {"n": %d, "pad": "%s"}\n\n' % (i, b"x" * 40) for i in range(5)),
        chunked=True,
        delay=0.1,
    ),
    "/cl-te": Answer(
        200,
        (),
        raw=(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"5\r\nhello\r\n0\r\n\r\n",
        ),
    ),
    "/two-cl": Answer(
        200, (), raw=(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello!!",)
    ),
    "/chunk-plus": Answer(
        200,
        (),
        raw=(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"5\r\nhello\r\n",
            b"+5\r\nworld\r\n0\r\n\r\n",
        ),
        delay=0.05,
    ),
    "/bare-lf": Answer(
        200, (), raw=(b"HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 5\nX-Odd: lf\n\nhello",)
    ),
}


def answer_for(path: bytes, body: bytes) -> Answer:
    """The table's answer for a path; `/echo` answers the body's length and SHA-256 (small, exact)."""
    name = path.split(b"?")[0].decode("latin-1")
    if name == "/echo":
        digest = f"{len(body)} {hashlib.sha256(body).hexdigest()}".encode()
        return _fixed(200, digest, (b"Content-Type", b"text/plain"))
    return ANSWERS.get(name) or _fixed(404, b"no such shape\n", (b"Content-Type", b"text/plain"))


@dataclass
class Received:
    """What an upstream was sent: wire bytes (HTTP/1.1) or (decoded fields, body) (HTTP/2)."""

    requests: list[object] = field(default_factory=list)
    port: int = 0
    cert: Path | None = None

    def clear(self) -> None:
        self.requests.clear()


# -- HTTP/1.1 -------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def fill(self) -> bool:
        data = self.sock.recv(1 << 20)
        self.buf += data
        return bool(data)

    def until(self, marker: bytes) -> bytes | None:
        while marker not in self.buf:
            if not self.fill():
                return None
        end = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:end], self.buf[end:]
        return out

    def exactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not self.fill():
                return None
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def _field(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _read_body(reader: _Reader, head: bytes) -> tuple[bytes, bytes] | None:
    """(wire bytes, de-chunked body) of a request body framed by `head`."""
    if b"chunked" in (_field(head, b"transfer-encoding") or b"").lower():
        wire, body = b"", b""
        while True:
            line = reader.until(b"\r\n")
            if line is None:
                return None
            wire += line
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while (trailer := reader.until(b"\r\n")) not in (None, b"\r\n"):
                    wire += trailer or b""
                return wire + b"\r\n", body
            data = reader.exactly(size + 2)
            if data is None:
                return None
            wire, body = wire + data, body + data[:-2]
    length = int(_field(head, b"content-length") or b"0")
    data = reader.exactly(length)
    return None if data is None else (data, data)


def _h1_answer(sock: socket.socket, answer: Answer, head_only: bool, gate: str | None = None) -> None:
    if answer.raw:
        for i, piece in enumerate(answer.raw):
            if i and answer.delay:
                time.sleep(answer.delay)
            sock.sendall(piece)
        return
    reason = {200: b"OK", 204: b"No Content", 304: b"Not Modified", 404: b"Not Found"}.get(
        answer.status, b"X"
    )
    lines = [b"HTTP/1.1 %d %s" % (answer.status, reason), *(k + b": " + v for k, v in answer.fields)]
    if answer.chunked:
        lines.append(b"Transfer-Encoding: chunked")
    sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n")
    if head_only or answer.status in (204, 304):
        return
    for i, chunk in enumerate(answer.chunks):
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if answer.chunked else chunk)
        if gate and i == 0 and len(answer.chunks) > 1:  # the rest only once the client holds chunk 1
            gates.hold(gate)
        elif answer.delay:
            time.sleep(answer.delay)
    if answer.chunked:
        sock.sendall(b"0\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in answer.trailers) + b"\r\n")


def _websocket(sock: socket.socket, reader: _Reader, head: bytes, received: Received) -> None:
    """Accept the upgrade, then echo each message (recording it) until the client closes."""
    from wsproto import ConnectionType
    from wsproto.connection import Connection
    from wsproto.events import BytesMessage, CloseConnection, TextMessage

    key = _field(head, b"sec-websocket-key") or b""
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    sock.sendall(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    ws = Connection(ConnectionType.SERVER)
    if reader.buf:
        ws.receive_data(reader.buf)
    while True:
        for event in ws.events():
            if isinstance(event, TextMessage | BytesMessage):
                received.requests.append(("ws", event.data))
                sock.sendall(ws.send(type(event)(data=event.data)))
            elif isinstance(event, CloseConnection):
                received.requests.append(("ws-close", event.code))
                sock.sendall(ws.send(event.response()))
                return
        data = sock.recv(65536)
        if not data:
            return
        ws.receive_data(data)


def _close_gently(sock: socket.socket) -> None:
    """End a cut answer with a FIN, not a reset: unread bytes from the proxy (an HTTP/2 SETTINGS
    ack, a window update) at close would make the kernel send RST, which can discard what the proxy
    has not read yet (the very head and bytes the cut answer is about)."""
    with suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2)
        while sock.recv(65536):
            pass


def _h1_connection(sock: socket.socket, received: Received) -> None:
    reader = _Reader(sock)
    with sock:
        while (head := reader.until(b"\r\n\r\n")) is not None:
            if (_field(head, b"upgrade") or b"").lower() == b"websocket":
                received.requests.append(head)
                _websocket(sock, reader, head, received)
                return
            framed = _read_body(reader, head)
            if framed is None:
                received.requests.append(head + b"<cut>")
                return
            wire, body = framed
            received.requests.append(head + wire)
            method, path = head.split(b" ", 2)[:2]
            answer = answer_for(path, body)
            _h1_answer(sock, answer, method == b"HEAD", gates.key_of(path))
            if answer.cut or answer.raw:
                return _close_gently(sock)
            if (_field(head, b"connection") or b"").lower() == b"close":
                return


# -- HTTP/2 ---------------------------------------------------------------------------------------


def _h2_connection(sock: socket.socket, received: Received) -> None:
    import h2.config
    import h2.connection
    import h2.events

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    heads: dict[int, Fields] = {}
    bodies: dict[int, bytes] = {}
    with sock:
        while data := sock.recv(1 << 20):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    heads[event.stream_id] = [(bytes(k), bytes(v)) for k, v in event.headers]
                    bodies[event.stream_id] = b""
                elif isinstance(event, h2.events.DataReceived):
                    bodies[event.stream_id] += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    fields, body = heads.pop(event.stream_id), bodies.pop(event.stream_id)
                    received.requests.append((fields, body))
                    if _h2_answer(conn, sock, event.stream_id, fields, body):
                        return _close_gently(sock)  # a short answer: the connection ends inside its body
            if out := conn.data_to_send():
                sock.sendall(out)


def _h2_answer(conn: object, sock: socket.socket, stream: int, fields: Fields, body: bytes) -> bool:
    """Answer one stream; True when the answer is a cut one (the caller closes the connection)."""
    pseudo = dict((k, v) for k, v in fields if k.startswith(b":"))
    answer = answer_for(pseudo.get(b":path", b"/"), body)
    gate = gates.key_of(pseudo.get(b":path", b"/"))
    out = [(b":status", str(answer.status).encode())]
    out += [(k.lower(), v) for k, v in answer.fields]
    empty = pseudo.get(b":method") == b"HEAD" or answer.status in (204, 304) or not answer.chunks
    conn.send_headers(stream, out, end_stream=empty)  # type: ignore[attr-defined]
    sock.sendall(conn.data_to_send())  # type: ignore[attr-defined]
    if empty:
        return False
    for i, chunk in enumerate(answer.chunks):
        end = i == len(answer.chunks) - 1 and not answer.cut and not answer.trailers
        conn.send_data(stream, chunk, end_stream=end)  # type: ignore[attr-defined]
        sock.sendall(conn.data_to_send())  # type: ignore[attr-defined]
        if gate and i == 0 and len(answer.chunks) > 1:  # the rest only once the client holds chunk 1
            gates.hold(gate)
        elif answer.delay:
            time.sleep(answer.delay)
    if answer.trailers:
        trailers = [(k.lower(), v) for k, v in answer.trailers]
        conn.send_headers(stream, trailers, end_stream=True)  # type: ignore[attr-defined]
        sock.sendall(conn.data_to_send())  # type: ignore[attr-defined]
    return answer.cut


# -- servers --------------------------------------------------------------------------------------


@contextmanager
def _serve(handler: object, tls_dir: Path | None, alpn: str | None) -> Iterator[Received]:
    received = Received()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    received.port = server.getsockname()[1]
    context = None
    if tls_dir is not None:
        cert, key = tls_dir / "upstream-cert.pem", tls_dir / "upstream-key.pem"
        if not cert.exists():  # one certificate for every upstream of a folder: one to trust
            cert, key = self_signed(tls_dir)
        received.cert = cert
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        if alpn:
            context.set_alpn_protocols([alpn])
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with suppress(OSError, ssl.SSLError, ValueError):
            conn.settimeout(30)
            if context is not None:
                conn = context.wrap_socket(conn, server_side=True)
            handler(conn, received)  # type: ignore[operator]

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        stop.set()
        thread.join(5)
        server.close()


def h1_upstream(tls_dir: Path | None = None) -> AbstractContextManager[Received]:
    """An HTTP/1.1 upstream (TLS offering only `http/1.1` when `tls_dir` is given)."""
    return _serve(_h1_connection, tls_dir, "http/1.1")


def h2_upstream(tls_dir: Path) -> AbstractContextManager[Received]:
    """An HTTP/2 upstream over TLS (ALPN `h2` only)."""
    return _serve(_h2_connection, tls_dir, "h2")
