"""An upstream that sends one large answer as fast as its socket takes it, counting what it sent.

`GET /N` answers N bytes (`Content-Length`), a 64 KiB block of random bytes repeated, so a test or
the bench can check the stored copy's size and hash without holding a second copy in memory
(`expected_sha256`). `sent` is the bytes the kernel took so far: a reader that is held back shows
as a `sent` that stops short of N.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

BLOCK = os.urandom(64 * 1024)


def body_chunks(size: int) -> Iterator[bytes]:
    """The answer of `size` bytes, block by block."""
    left = size
    while left > 0:
        piece = BLOCK[: min(left, len(BLOCK))]
        left -= len(piece)
        yield piece


def expected_sha256(size: int) -> str:
    digest = hashlib.sha256()
    for piece in body_chunks(size):
        digest.update(piece)
    return digest.hexdigest()


@dataclass
class BigStream:
    sock: socket.socket
    sent: int = 0
    done: int = 0
    """Answers sent whole."""
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"


def _serve(up: BigStream, conn: socket.socket) -> None:
    with conn:
        request = b""
        while b"\r\n\r\n" not in request:
            data = conn.recv(4096)
            if not data:
                return
            request += data
        size = int(request.split(b" ", 2)[1].strip(b"/").split(b"?")[0])
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % size
        )
        try:
            conn.sendall(head)
            for piece in body_chunks(size):
                conn.sendall(piece)
                up.sent += len(piece)
            up.done += 1
        except OSError:
            return


@contextmanager
def big_stream() -> Iterator[BigStream]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    up = BigStream(sock)

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=_serve, args=(up, conn), daemon=True)
            up.threads.append(thread)
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield up
    finally:
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        acceptor.join(timeout=5)
