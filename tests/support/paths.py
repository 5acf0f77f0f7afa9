"""The listener paths an agent's request takes through a proxy, and a client that says what it saw.

A door is one way in: `forward-http` (an absolute-form request to the forward listener),
`connect-tls` (a CONNECT tunnel and TLS, HTTP/1.1 inside), `h2` (httpx with HTTP/2 through a
tunnel), `reverse` (a reverse listener), `model` (a model API listener, with flightlog's identity
prefix) and `model-forward` (the same request sent through the forward listener, as a client honouring
both the proxy and the base URL sends it). `visit()` makes one request by one door and returns what
the client got: status, head, body, when the first byte came and when each later read did. Plain
mitmdump has no model listeners: for it, `model` is its reverse listener to the same target (without
the prefix, which only flightlog reads) and `model-forward` a forward request to that target, which
is what flightlog makes of it. `model-connect` is the same through a CONNECT tunnel carrying plain
HTTP (as Node's proxy agent sends it): to the listener through flightlog, to its target through
mitmdump. The path differential suite (tests/capture/test_paths.py) and
`python -m bench.paths` share this.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import gates

DOORS = ("forward-http", "connect-tls", "h2", "reverse", "model", "model-forward", "model-connect")
UPSTREAM_OF = {"connect-tls": "h1s", "h2": "h2"}
"""The upstream each door reaches (the others: the plain HTTP/1.1 one)."""


@dataclass(frozen=True)
class Proxy:
    """Where one proxy listens. `model` and `model_down` are flightlog's model listeners (to the
    plain upstream and to the refusing port); None for plain mitmdump."""

    forward: int
    reverse: int
    reverse_down: int
    ca: Path
    model: int | None = None
    model_down: int | None = None

    @property
    def flightlog(self) -> bool:
        return self.model is not None


@dataclass(frozen=True)
class Upstreams:
    h1: int
    h1s: int
    h2: int
    down: int
    """A port that refuses connections."""


@dataclass
class Seen:
    """What the client got: the answer's status and head (None/empty when none came), the body as
    read (chunked framing removed), when its first byte came and when each later read did (seconds
    after the request was sent), and how the exchange failed for it, if it did."""

    status: int | None = None
    head: bytes = b""
    body: bytes = b""
    first_byte: float | None = None
    reads: list[float] = field(default_factory=list)
    failure: str | None = None
    left: bool = False
    """The client left before the answer's end (on purpose, `leave_after`)."""
    events: list[float] = field(default_factory=list)
    """When each event of an event stream (`data:` line) had arrived, seconds after the request."""

    def saw(self, data: bytes, at: float) -> None:
        """Note the events complete in `data` (everything read so far) at `at`."""
        while len(self.events) < data.count(b"data:"):
            self.events.append(at)


def visit(
    door: str,
    path: str,
    proxy: Proxy,
    ups: Upstreams,
    *,
    down: bool = False,
    leave_after: int | None = None,
    session: str = "",
    timeout: float = 30.0,
    gate: str | None = None,
    hold: float = 0.0,
) -> Seen:
    """One GET of `path` by `door`; with `down`, to the refusing port; with `leave_after`, the
    client closes its connection once it has that many body bytes. With `gate` (a key of
    tests/support/gates.py, also in `path`'s query), the client opens it once it holds body bytes
    (`hold` seconds later: a known pause between the answer's first byte and its rest) or has left."""
    release = _releaser(gate, hold)
    if door == "h2":
        return _h2(path, proxy, ups, down=down, leave_after=leave_after, timeout=timeout, release=release)
    upstream = ups.down if down else getattr(ups, UPSTREAM_OF.get(door, "h1"))
    prefix = f"/_flightlog/session={session}" if session else ""
    if door == "connect-tls":
        sock = _tunnel(proxy, upstream, timeout)
        if isinstance(sock, Seen):
            return sock
        target, host = path, f"127.0.0.1:{upstream}"
    elif door == "model-connect":
        through = ((proxy.model_down if down else proxy.model) or 0) if proxy.flightlog else upstream
        sock = _tunnel(proxy, through, timeout, tls=False)
        if isinstance(sock, Seen):
            return sock
        target, host = (prefix if proxy.flightlog else "") + path, f"127.0.0.1:{through}"
    else:
        if door == "forward-http" or (door == "model-forward" and not proxy.flightlog):
            port, target = proxy.forward, f"http://127.0.0.1:{upstream}{path}"
        elif door == "reverse" or (door == "model" and not proxy.flightlog):
            port, target = (proxy.reverse_down if down else proxy.reverse), path
        elif door == "model":
            port, target = (proxy.model_down if down else proxy.model) or 0, prefix + path
        else:  # model-forward, through flightlog's forward listener to its model listener
            model = (proxy.model_down if down else proxy.model) or 0
            port, target = proxy.forward, f"http://127.0.0.1:{model}{prefix}{path}"
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        host = target.split("/")[2] if target.startswith("http://") else f"127.0.0.1:{port}"
    request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    with sock:
        return _read(sock, request.encode(), leave_after, release)


def _releaser(gate: str | None, hold: float) -> Callable[[bool], None]:
    """What the client calls when it holds body bytes (False) or has left (True): opens `gate` once."""
    done: list[bool] = []

    def release(left: bool) -> None:
        if gate is None or done:
            return
        done.append(True)
        if not left:
            time.sleep(hold)
        gates.open_gate(gate)

    return release


def direct(door: str, path: str, ups: Upstreams, cert: Path, timeout: float = 15.0) -> Seen:
    """The same GET straight to the upstream `door` reaches, no proxy: the baseline of the bench."""
    kind = UPSTREAM_OF.get(door, "h1")
    port = getattr(ups, kind)
    if kind == "h2":
        seen = Seen()
        started = time.monotonic()
        verify = ssl.create_default_context(cafile=str(cert))
        with (
            httpx.Client(http2=True, verify=verify, timeout=timeout) as client,
            client.stream("GET", f"https://127.0.0.1:{port}{path}") as response,
        ):
            seen.first_byte = time.monotonic() - started
            seen.status = response.status_code
            for chunk in response.iter_raw():
                seen.reads.append(time.monotonic() - started)
                seen.body += chunk
                seen.saw(seen.body, seen.reads[-1])
        return seen
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if kind == "h1s":
        context = ssl.create_default_context(cafile=str(cert))
        context.set_alpn_protocols(["http/1.1"])
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    with sock:
        return _read(sock, request.encode(), None)


def _tunnel(proxy: Proxy, upstream: int, timeout: float, *, tls: bool = True) -> socket.socket | Seen:
    sock = socket.create_connection(("127.0.0.1", proxy.forward), timeout=timeout)
    sock.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (upstream, upstream))
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = sock.recv(65536)
        if not data:
            break
        answer += data
    if not answer.startswith(b"HTTP/1.1 200"):  # the CONNECT failed: that answer is what the client saw
        head, _, body = answer.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        while length and len(body) < int(length.group(1)) and (data := sock.recv(65536)):
            body += data
        sock.close()
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else None
        return Seen(status, head + b"\r\n\r\n", body, failure="CONNECT refused")
    if not tls:
        return sock
    context = ssl.create_default_context(cafile=str(proxy.ca))
    context.set_alpn_protocols(["http/1.1"])
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def _read(
    sock: socket.socket,
    request: bytes,
    leave_after: int | None,
    release: Callable[[bool], None] = lambda left: None,
) -> Seen:
    """Send `request` and read the answer to the connection's end (or until `leave_after` body bytes);
    `release` is told when body bytes are first held, and when the client has left."""
    seen = Seen()
    started = time.monotonic()
    sock.sendall(request)
    raw = b""
    while True:
        try:
            data = sock.recv(65536)
        except (TimeoutError, ConnectionError, ssl.SSLError) as e:
            seen.failure = seen.failure or type(e).__name__
            break
        if not data:
            break
        now = time.monotonic() - started
        if seen.first_byte is None:
            seen.first_byte = now
        else:
            seen.reads.append(now)
        raw += data
        seen.saw(raw, now)
        if leave_after is not None and b"\r\n\r\n" in raw and len(_body(raw)[1]) >= leave_after:
            seen.left = True
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()
            release(True)
            break
        if b"\r\n\r\n" in raw and _body(raw)[1]:
            release(False)
    release(False)  # whatever came (a failure, a buffered answer): the upstream need not wait on
    if b"\r\n\r\n" not in raw:
        seen.failure = seen.failure or ("empty reply" if not raw else "cut inside the head")
        return seen
    head, body = _body(raw)
    seen.head, seen.body = head, body
    seen.status = int(head.split(b" ")[1])
    return seen


def _body(raw: bytes) -> tuple[bytes, bytes]:
    """(head, body with chunked framing removed, as far as it goes) of one HTTP/1.1 answer."""
    end = raw.index(b"\r\n\r\n") + 4
    head, rest = raw[:end], raw[end:]
    if b"transfer-encoding: chunked" not in head.lower():
        return head, rest
    body = b""
    while rest:
        line, sep, after = rest.partition(b"\r\n")
        if not sep:
            break
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        body += after[:size]
        rest = after[size + 2 :]
    return head, body


def _h2(
    path: str,
    proxy: Proxy,
    ups: Upstreams,
    *,
    down: bool,
    leave_after: int | None,
    timeout: float,
    release: Callable[[bool], None],
) -> Seen:
    seen = Seen()
    verify = ssl.create_default_context(cafile=str(proxy.ca))
    port = ups.down if down else ups.h2
    started = time.monotonic()
    try:
        with (
            httpx.Client(
                http2=True, proxy=f"http://127.0.0.1:{proxy.forward}", verify=verify, timeout=timeout
            ) as client,
            client.stream("GET", f"https://127.0.0.1:{port}{path}") as response,
        ):
            seen.first_byte = time.monotonic() - started
            seen.status = response.status_code
            seen.head = b"".join(k + b": " + v + b"\r\n" for k, v in response.headers.raw)
            for chunk in response.iter_raw():
                seen.reads.append(time.monotonic() - started)
                seen.body += chunk
                seen.saw(seen.body, seen.reads[-1])
                if leave_after is not None and len(seen.body) >= leave_after:
                    seen.left = True
                    break
                if seen.body:
                    release(False)
    except httpx.HTTPError as e:
        seen.failure = type(e).__name__
    release(seen.left)  # left: the stream is reset by now; otherwise whatever came, the upstream goes on
    return seen
