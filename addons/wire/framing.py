"""HTTP/1 message framing for the relay: where a body ends, and its bytes without chunk framing.

The relay forwards the wire bytes untouched and uses these decoders only to know when a message is
complete and to record the body the way mitmproxy's `raw_content` would (transfer framing removed,
content-encoding kept).
"""

from __future__ import annotations

from addons.wire.errors import FramingError
from storage.heads import Head


class Body:
    """Incremental decoder of one message body: `feed(data)` gives body bytes; `done` when complete."""

    done: bool = False
    consumed_all: bool = True
    """False for bodies that end when the connection closes."""

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Body bytes in `data`, and bytes after the body's end (the next message)."""
        raise NotImplementedError


class Empty(Body):
    done = True

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        return b"", data


class Sized(Body):
    def __init__(self, length: int) -> None:
        self.remaining = length
        self.done = length == 0

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        body, rest = data[: self.remaining], data[self.remaining :]
        self.remaining -= len(body)
        self.done = self.remaining == 0
        return body, rest


class UntilClose(Body):
    consumed_all = False

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        return data, b""


class Chunked(Body):
    """Chunked transfer coding: sizes, data, CRLFs and an optional trailer section."""

    def __init__(self) -> None:
        self.buf = b""
        self.remaining = 0
        self.state = "size"  # size | data | data_crlf | trailer

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        self.buf += data
        out = bytearray()
        while not self.done:
            if self.state == "size":
                line, sep, rest = self.buf.partition(b"\r\n")
                if not sep:
                    break
                try:
                    self.remaining = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError as e:
                    raise FramingError(f"bad chunk size {line[:40]!r}") from e
                self.buf = rest
                self.state = "data" if self.remaining else "trailer"
            elif self.state == "data":
                take = self.buf[: self.remaining]
                out += take
                self.buf = self.buf[len(take) :]
                self.remaining -= len(take)
                if self.remaining:
                    break
                self.state = "data_crlf"
            elif self.state == "data_crlf":
                if len(self.buf) < 2:
                    break
                self.buf = self.buf[2:]
                self.state = "size"
            else:  # trailer: lines until an empty one
                line, sep, rest = self.buf.partition(b"\r\n")
                if not sep:
                    break
                self.buf = rest
                if not line:
                    self.done = True
        rest, self.buf = (self.buf, b"") if self.done else (b"", self.buf)
        return bytes(out), rest


def request_body(head: Head) -> Body:
    """The framing of a request body from its head."""
    if b"chunked" in b",".join(head.get_all(b"transfer-encoding")).lower():
        return Chunked()
    length = head.get(b"content-length")
    return Sized(int(length)) if length else Empty()


def response_body(head: Head, method: bytes) -> Body:
    """The framing of a response body from its head and the request's method."""
    status = int(head.start[1])
    if method.upper() == b"HEAD" or 100 <= status < 200 or status in (204, 304):
        return Empty()
    if b"chunked" in b",".join(head.get_all(b"transfer-encoding")).lower():
        return Chunked()
    length = head.get(b"content-length")
    if length is not None:
        return Sized(int(length))
    return UntilClose()
