"""The request shapes of the differential suite (shared by the fast test and the bench's long form).

HTTP/1.1 clients send exact bytes (`{UP}` is the upstream's host:port); HTTP/2 clients are httpx.
Each shape's path carries `shape=NAME` so its recording can be found in the Ledger.
"""

from __future__ import annotations

from tests.support.differential import Shape

BIG = 9 * 1024 * 1024
"""Over flightlog's (and this mitmdump's) 8 MiB `stream_large_bodies`: streamed through unread."""
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
STREAM_BODY = b'{"model": "m", "stream": true}'


def _get(name: str, path: str, *fields: bytes, method: bytes = b"GET", absolute: bool = True) -> bytes:
    target = (b"http://{UP}" if absolute else b"") + path.encode() + b"?shape=" + name.encode()
    lines = [method + b" " + target + b" HTTP/1.1", b"Host: {UP}", *fields, b"Connection: close"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _post(name: str, path: str, body: bytes, *fields: bytes, absolute: bool = True) -> bytes:
    head = _get(name, path, b"Content-Length: %d" % len(body), *fields, method=b"POST", absolute=absolute)
    return head + body


def h1_shapes(upstream: str) -> list[Shape]:
    """HTTP/1.1 client shapes, against a plain (`h1`, absolute-form) or TLS (`h1s`/`h2`) upstream."""
    plain = upstream == "h1"
    p = f"{upstream}-h1"

    def get(name: str, path: str, *fields: bytes, method: bytes = b"GET") -> Shape:
        return Shape(
            f"{p}-{name}", upstream, _get(f"{p}-{name}", path, *fields, method=method, absolute=plain)
        )

    def post(name: str, path: str, body: bytes, *fields: bytes) -> Shape:
        return Shape(f"{p}-{name}", upstream, _post(f"{p}-{name}", path, body, *fields, absolute=plain))

    chunked_head = _get(
        f"{p}-chunked-up", "/echo", b"Transfer-Encoding: chunked", method=b"POST", absolute=plain
    )
    expect_head = _get(
        f"{p}-expect",
        "/echo",
        b"Content-Length: %d" % len(BODY),
        b"Expect: 100-continue",
        method=b"POST",
        absolute=plain,
    )
    shapes = [
        get("fixed", "/fixed", b"Accept: */*", b"X-Odd-CASE: Value  with  spaces"),
        get("chunked-down", "/chunked"),
        get("empty-down", "/empty"),
        post("fixed-up", "/echo", BODY, b"Content-Type: application/json"),
        post("empty-up", "/echo", b""),
        Shape(f"{p}-chunked-up", upstream, chunked_head, chunked_body=(b"hello ", b"world ", b"text\n")),
        Shape(f"{p}-expect", upstream, expect_head, expect_continue=BODY),
        get("head", "/head", method=b"HEAD"),
        get("204", "/204"),
        get("304", "/304", b'If-None-Match: "abc"'),
        get("gzip", "/gzip", b"Accept-Encoding: gzip"),
        get("br", "/br", b"Accept-Encoding: br"),
        get("sse", "/sse", b"Accept: text/event-stream"),
        post("stream-body", "/sse", STREAM_BODY, b"Content-Type: application/json"),
        get("identity", "/fixed", b"X-Flightlog-Session: s-1", b"X-Flightlog-Agent: a-1"),
    ]
    if plain:
        ws_head = _get(
            f"{p}-websocket",
            "/ws",
            b"Upgrade: websocket",
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            b"Sec-WebSocket-Version: 13",
        ).replace(b"Connection: close", b"Connection: Upgrade")
        shapes.append(Shape(f"{p}-websocket", upstream, ws_head, websocket=(b"hello", b"again")))
    return shapes


def big_shapes(upstream: str) -> list[Shape]:
    """Uploads over 8 MiB, with a length and chunked."""
    plain = upstream == "h1"
    p = f"{upstream}-h1"
    big = bytes(range(256)) * (BIG // 256)
    chunked_head = _get(
        f"{p}-big-chunked", "/echo", b"Transfer-Encoding: chunked", method=b"POST", absolute=plain
    )
    return [
        Shape(f"{p}-big-fixed", upstream, _post(f"{p}-big-fixed", "/echo", big, absolute=plain)),
        Shape(
            f"{p}-big-chunked",
            upstream,
            chunked_head,
            chunked_body=tuple(big[i : i + (1 << 20)] for i in range(0, BIG, 1 << 20)),
        ),
    ]


def h2_shapes(upstream: str) -> list[Shape]:
    """HTTP/2 client (httpx) shapes against a TLS upstream speaking HTTP/1.1 (`h1s`) or HTTP/2 (`h2`)."""
    p = f"{upstream}-h2"

    def shape(name: str, method: str, path: str, *headers: tuple[str, str], body: bytes | None = None,
              chunked: tuple[bytes, ...] | None = None) -> Shape:  # fmt: skip
        return Shape(
            f"{p}-{name}",
            upstream,
            h2=(method, f"{path}?shape={p}-{name}", headers, body),
            chunked_body=chunked,
        )

    return [
        shape("fixed", "GET", "/fixed"),
        shape("chunked-down", "GET", "/chunked"),
        shape("empty-down", "GET", "/empty"),
        shape("fixed-up", "POST", "/echo", ("content-type", "application/json"), body=BODY),
        shape("chunked-up", "POST", "/echo", chunked=(b"hello ", b"world ", b"text\n")),
        shape("head", "HEAD", "/head"),
        shape("204", "GET", "/204"),
        shape("304", "GET", "/304", ("if-none-match", '"abc"')),
        shape("gzip", "GET", "/gzip", ("accept-encoding", "gzip")),
        shape("br", "GET", "/br", ("accept-encoding", "br")),
        shape("sse", "GET", "/sse", ("accept", "text/event-stream")),
        shape("stream-body", "POST", "/sse", ("content-type", "application/json"), body=STREAM_BODY),
        shape("big-chunked", "POST", "/echo", chunked=tuple(bytes(1 << 20) for _ in range(9))),
    ]


def curl_shapes(upstream: str) -> list[Shape]:
    """curl as the issue ran it: a chunked upload from stdin (curl picks HTTP/2 where it is offered)."""
    p = f"{upstream}-curl"
    return [
        Shape(
            f"{p}-chunked-up",
            upstream,
            curl=(
                (
                    "--data-binary",
                    "@-",
                    "-H",
                    "Transfer-Encoding: chunked",
                    f"{{URL}}/echo?shape={p}-chunked-up",
                ),
                b"hello world text\n",
            ),
        ),
        Shape(f"{p}-fixed", upstream, curl=((f"{{URL}}/fixed?shape={p}-fixed",), b"")),
    ]


def short_shapes() -> list[Shape]:
    """An answer whose upstream promises 1,000 bytes, sends 10 and closes, from each client against
    each upstream: mitmproxy answers it itself (its 502), and flightlog records the 10 bytes."""
    shapes = []
    for upstream in ("h1", "h1s"):
        name = f"{upstream}-h1-short"
        shapes.append(Shape(name, upstream, _get(name, "/short", absolute=upstream == "h1")))
    for upstream in ("h1s", "h2"):
        name = f"{upstream}-h2-short"
        shapes.append(Shape(name, upstream, h2=("GET", f"/short?shape={name}", (), None)))
    return shapes


def trailer_shapes() -> list[Shape]:
    """An answer with HTTP trailers (chunked with `Trailer:` over HTTP/1.1, a trailing HEADERS frame
    over HTTP/2), from an HTTP/1.1 client (plain and TLS) and an HTTP/2 client against each upstream.
    Short client timeouts: where mitmdump leaves the client waiting, the wait is the outcome."""
    shapes = []
    for upstream in ("h1", "h1s"):
        name = f"{upstream}-h1-trailers"
        raw = _get(name, "/trailers", absolute=upstream == "h1")
        shapes.append(Shape(name, upstream, raw, timeout=5.0))
    for upstream in ("h1s", "h2"):
        name = f"{upstream}-h2-trailers"
        shapes.append(Shape(name, upstream, h2=("GET", f"/trailers?shape={name}", (), None), timeout=5.0))
    return shapes
