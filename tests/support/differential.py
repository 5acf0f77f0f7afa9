"""Plain mitmdump as the oracle: the same request shape through it and through flightlog, compared.

A `Shape` is one exchange a client makes (exact HTTP/1.1 bytes on a raw socket, or an HTTP/2 request
made with httpx) against one of the upstreams in `tests.support.wire_upstream`. `run()` sends it
through a proxy and returns what the upstream received and what the client received; `compare()`
holds flightlog's outcome against mitmdump's, byte for byte, after only the differences listed in
`ON_PURPOSE` (each one a thing flightlog changes deliberately).
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.processes import spawn, stop_group
from tests.support.wire_upstream import Received

TRAILERS_ON_PURPOSE: dict[str, tuple[str, object, object]] = {
    "h1-client": (
        "mitmproxy 12 cannot read HTTP/1 trailers nor send trailers to an HTTP/1 client: mitmdump "
        "answers 502 once the upstream closes (and leaves the client waiting while the upstream keeps "
        "the connection); flightlog closes the client's connection at once, without an answer",
        b"HTTP/1.1 502 Bad Gateway",
        b"",
    ),
    "h2-client-h1-upstream": (
        "mitmproxy 12 cannot read HTTP/1 trailers: mitmdump leaves the HTTP/2 client waiting until its "
        "own timeout; flightlog resets the stream at once",
        ("failed", "ReadTimeout"),
        ("failed", "RemoteProtocolError"),
    ),
}
"""For an answer with HTTP trailers where mitmproxy cannot relay them (HTTP/1 on either side): why
the client's outcome differs, what mitmdump gives it (a bytes value: how its answer starts) and what
flightlog gives it (a clear failure instead of a wait). HTTP/2 on both sides, mitmproxy relays the
trailers and the two are equal."""

ON_PURPOSE: dict[str, Callable[[bytes], bytes]] = {
    "X-Flightlog-* request headers carry identity to flightlog and are removed before forwarding": (
        lambda wire: re.sub(rb"(?im)^x-flightlog-[^\r\n]*\r\n", b"", wire)
    ),
    "Proxy-Authorization (the proxy URL's credentials) carries identity to flightlog and is removed; "
    "plain mitmdump without proxy authentication forwards it": (
        lambda wire: re.sub(rb"(?im)^proxy-authorization:[^\r\n]*\r\n", b"", wire)
    ),
}
"""What flightlog changes on purpose, applied to what plain mitmdump's upstream received."""

NORMALIZED = (
    "Chunk boundaries of chunked bodies are compared de-chunked, on both sides: flightlog passes a "
    "streamed answer's chunks on as they arrive (its tee and relay) where mitmdump buffers the answer "
    "and sends it as one chunk, and a streamed upload's chunks follow socket read timing in both."
)
"""What is normalized on both sides before comparing (the body bytes themselves are compared)."""


def _chunked(head: bytes) -> bool:
    return re.search(rb"(?im)^transfer-encoding:[^\r\n]*chunked", head) is not None


def dechunk(wire: bytes) -> bytes:
    """HTTP/1 messages with each chunked body replaced by `<chunked>` and its de-chunked bytes."""
    out, rest = b"", wire
    while rest:
        end = rest.find(b"\r\n\r\n")
        if end < 0:
            return out + rest
        head, rest = rest[: end + 4], rest[end + 4 :]
        out += head
        if re.match(rb"HTTP/1\.1 1\d\d ", head):
            continue  # an interim answer: the final one follows
        if not _chunked(head):
            return out + rest
        body = b""
        while True:
            line, _, rest = rest.partition(b"\r\n")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                out += b"<chunked>" + body + rest  # trailers and whatever follows, as they are
                return out
            body, rest = body + rest[:size], rest[size + 2 :]
    return out


@dataclass(frozen=True)
class Shape:
    """One exchange: `raw` bytes for an HTTP/1.1 client, or `h2` (method, path, headers, body) for
    httpx with HTTP/2. `tls` goes through CONNECT; `upstream` names the upstream ("h1", "h1s", "h2")."""

    name: str
    upstream: str
    raw: bytes = b""
    h2: tuple[str, str, tuple[tuple[str, str], ...], bytes | None] | None = None
    chunked_body: tuple[bytes, ...] | None = None
    expect_continue: bytes | None = None
    websocket: tuple[bytes, ...] = ()
    curl: tuple[tuple[str, ...], bytes] | None = None
    """curl's arguments (`{URL}` is the upstream URL) and its standard input."""
    timeout: float = 20.0
    """How long the client waits for its answer (a shape where mitmdump leaves it waiting: short)."""

    @property
    def tls(self) -> bool:
        return self.upstream != "h1"


@dataclass
class Outcome:
    upstream: list[object] = field(default_factory=list)
    client: object = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def plain_mitmdump(confdir: Path, trusted: Path, *extra: str) -> Iterator[int]:
    """`mitmdump` with mitmproxy's defaults (plus flightlog's own `stream_large_bodies`)."""
    confdir.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    mitmdump = Path(sys.executable).with_name("mitmdump")
    args = [str(mitmdump), "-q", "--listen-host", "127.0.0.1", "--listen-port", str(port)]
    args += ["--set", f"confdir={confdir}", "--set", "stream_large_bodies=8m"]
    args += ["--set", f"ssl_verify_upstream_trusted_ca={trusted}", *extra]
    proc = spawn(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("mitmdump did not listen")
        yield port
    finally:
        stop_group(proc)


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            data = sock.recv(1 << 20)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            return out + b"<cut>"
        if not data:
            return out
        out += data


def _head(sock: socket.socket, got: bytes = b"") -> bytes:
    """Read until the end of a head; a connection closed before it fails at once (looping on the
    b"" of a closed socket would hang the test until pytest-timeout)."""
    while b"\r\n\r\n" not in got:
        data = sock.recv(4096)
        if not data:
            raise AssertionError(f"connection closed before the end of the head: {got!r}")
        got += data
    return got


def _tunnel(port: int, up_port: int, ca: Path, timeout: float) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (up_port, up_port))
    head = _head(sock)
    assert head.startswith(b"HTTP/1.1 200"), head
    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["http/1.1"])
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def _h1(shape: Shape, port: int, up_port: int, ca: Path) -> bytes:
    raw = shape.raw.replace(b"{UP}", b"127.0.0.1:%d" % up_port)
    sock = (
        _tunnel(port, up_port, ca, shape.timeout)
        if shape.tls
        else socket.create_connection(("127.0.0.1", port), timeout=shape.timeout)
    )
    with sock:
        if shape.expect_continue is not None:
            sock.sendall(raw)
            interim = _head(sock)
            sock.sendall(shape.expect_continue)
            return interim + _read_all(sock)
        if shape.websocket:
            return _websocket(sock, raw, shape.websocket)
        sock.sendall(raw)
        if shape.chunked_body is not None:
            for chunk in shape.chunked_body:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        return _read_all(sock)


def _websocket(sock: socket.socket, raw: bytes, messages: tuple[bytes, ...]) -> bytes:
    """Upgrade; send each message as a masked text frame (fixed key) and wait for its echo; close
    with 1000 and read to the end. One step at a time, so the order on the wire is fixed."""
    sock.sendall(raw)
    got = _head(sock)
    mask = b"\x01\x02\x03\x04"
    for message in (*messages, None):
        payload = b"\x03\xe8" if message is None else message
        opcode = 0x88 if message is None else 0x81
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(bytes([opcode, 0x80 | len(payload)]) + mask + masked)
        if message is None:
            break
        want = len(got) + 2 + len(message)  # the server's unmasked echo frame
        while len(got) < want:
            data = sock.recv(4096)
            if not data:
                return got + b"<cut>"
            got += data
    return got + _read_all(sock)


def _h2(shape: Shape, port: int, up_port: int, ca: Path) -> object:
    assert shape.h2 is not None
    method, path, headers, body = shape.h2
    content: object = body
    if shape.chunked_body is not None:
        parts = shape.chunked_body
        content = iter(parts)  # no length known: sent as DATA frames, as curl's chunked upload is
    verify = ssl.create_default_context(cafile=str(ca))
    with httpx.Client(
        http2=True, proxy=f"http://127.0.0.1:{port}", verify=verify, timeout=shape.timeout
    ) as client:
        request = client.build_request(
            method, f"https://127.0.0.1:{up_port}{path}", headers=headers, content=content
        )
        try:
            r = client.send(request, stream=True)
            raw = b"".join(r.iter_raw())
        except httpx.HTTPError as e:  # the proxy cut the stream (a short answer): what the client saw
            return ("failed", type(e).__name__)
        r.close()
        return (r.http_version, r.status_code, tuple(r.headers.raw), raw)


def _curl(shape: Shape, port: int, up_port: int, ca: Path) -> object:
    assert shape.curl is not None
    args, stdin = shape.curl
    url = f"https://127.0.0.1:{up_port}"
    argv = ["curl", "-sS", "-i", "-x", f"http://127.0.0.1:{port}", "--cacert", str(ca), "--max-time", "20"]
    argv += [a.replace("{URL}", url) for a in args]
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=30, check=False)
    return (done.returncode, done.stdout)


def run(shape: Shape, port: int, upstreams: dict[str, Received], ca: Path) -> Outcome:
    """Send one shape through the proxy on `port`; what the upstream and the client received."""
    up = upstreams[shape.upstream]
    up.clear()
    if shape.curl is not None:
        client = _curl(shape, port, up.port, ca)
    elif shape.h2 is not None:
        client = _h2(shape, port, up.port, ca)
    else:
        client = _h1(shape, port, up.port, ca)
    time.sleep(0.05)  # the upstream thread files what it read before we look
    return Outcome(upstream=list(up.requests), client=client)


def compare(oracle: Outcome, ours: Outcome) -> list[str]:
    """Where flightlog's outcome differs from mitmdump's, after the on-purpose differences."""
    expected = []
    for item in oracle.upstream:
        if isinstance(item, bytes):
            for change in ON_PURPOSE.values():
                item = change(item)
        expected.append(item)
    expected = [dechunk(x) if isinstance(x, bytes) else x for x in expected]
    got = [dechunk(x) if isinstance(x, bytes) else x for x in ours.upstream]
    oracle_client = dechunk(oracle.client) if isinstance(oracle.client, bytes) else oracle.client
    our_client = dechunk(ours.client) if isinstance(ours.client, bytes) else ours.client
    problems = []
    if expected != got:
        problems.append(
            f"upstream received differs:\n  mitmdump: {_short(expected)}\n  flightlog: {_short(got)}"
        )
    if oracle_client != our_client:
        problems.append(
            f"client received differs:\n  mitmdump: {_short(oracle_client)}\n"
            f"  flightlog: {_short(our_client)}"
        )
    return problems


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) < 1500 else text[:1500] + f"... ({len(text)} chars)"
