"""The capture's pure parts: identity, stream detection, local routes, proxy env."""

from __future__ import annotations

import base64
from pathlib import Path

from addons.proxy_env import Listener, proxy_env
from addons.sync_paths import matches
from door.routes import Declared, Route, Routes
from recording.identity import Identity, from_headers, from_proxy_authorization, parse_user
from recording.streaming import should_tee


def test_identity_from_proxy_credentials_and_headers() -> None:
    """The proxy URL's user part names agent/session/task/turn; X-Flightlog-* headers override it."""
    token = base64.b64encode(b"agent=alpha;session=s%3B1;task=t9:ignored").decode()
    who = from_proxy_authorization(f"Basic {token}")
    assert who == Identity(agent="alpha", session="s;1", task="t9")
    assert parse_user("bob") == Identity(agent="bob")
    assert from_proxy_authorization("Bearer abc") == Identity()
    over = from_headers([("X-Flightlog-Task", "t10"), ("X-Other", "x")]).over(who)
    assert over == Identity(agent="alpha", session="s;1", task="t10")
    assert parse_user(Identity(agent="a b", session="s;1").userinfo()) == Identity(agent="a b", session="s;1")


def test_stream_detection() -> None:
    """Answers are teed (streamed as they arrive) when the answer says so: an event stream, no
    length, or a large one; whatever the request looked like."""
    assert should_tee("text/event-stream", "10")
    assert should_tee("application/json", None)
    assert not should_tee("application/json", "1024")
    assert should_tee("application/octet-stream", str(2 * 1024 * 1024))


def test_sync_path_globs_match_paths_without_query() -> None:
    """Globs match the path; the query string does not count."""
    assert matches("/hooks/github?x=1", ["/hooks/*"])
    assert not matches("/api/hooks", ["/hooks/*"])


def test_local_routes_registry() -> None:
    """Longest prefix wins; unknown paths match nothing (and answer 404 naming the routes)."""
    routes = Routes()

    def route(prefix: str) -> Route:
        return Route(
            prefix, "http", frozenset({"read"}), lambda *_: Declared("read"), lambda *_: (200, {}, b"")
        )

    routes.add(route("/api/"))
    routes.add(route("/api/ledger/"))
    assert routes.match("/api/ledger/row/1") is routes.routes["/api/ledger/"]
    assert routes.match("/api/other") is routes.routes["/api/"]
    assert routes.match("/nothing") is None
    assert routes.missing("/nothing")[0] == 404


def test_proxy_env_sets_every_variable_clients_read() -> None:
    """Both cases of the proxy variables carry the identity; every CA variable names the CA."""
    env = proxy_env(
        ("127.0.0.1", 8080),
        Path("/ca.pem"),
        Identity(agent="alpha", session="s1"),
        (Listener("reverse:https://api.openai.com@0", "127.0.0.1", 9001),),
    )
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://agent=alpha;session=s1:flightlog@127.0.0.1:8080"
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == "/ca.pem"
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9001/_flightlog/agent=alpha;session=s1/v1"
    anonymous = proxy_env(("127.0.0.1", 8080), Path("/ca.pem"), reverse=env_listeners())
    assert anonymous["OPENAI_BASE_URL"] == "http://127.0.0.1:9001/v1"


def env_listeners() -> tuple[Listener, ...]:
    return (Listener("reverse:https://api.openai.com@0", "127.0.0.1", 9001),)


def test_identity_rides_in_a_path_prefix_for_clients_without_proxy_support() -> None:
    """`/_flightlog/USER/rest` gives the identity and `/rest`; any other path is left alone."""
    from recording.identity import from_path

    who, rest = from_path("/_flightlog/agent=node%20bot;task=t9/v1/chat/completions?x=1")
    assert who == Identity(agent="node bot", task="t9") and rest == "/v1/chat/completions?x=1"
    assert from_path("/v1/models") == (Identity(), "/v1/models")


def test_storage_endpoints_are_never_recorded() -> None:
    """The S3 endpoint of the blob store (variable or URL parameter) is on the never-recorded list."""
    from recording.capture_setup import storage_hosts

    env = {"AWS_ENDPOINT_URL": "http://minio.internal:9000"}
    assert set(storage_hosts("s3://b/p?endpoint=http://127.0.0.9:4566", env)) == {
        "minio.internal",
        "127.0.0.9",
    }
    assert storage_hosts("file:///x", {}) == []


def test_records_cross_the_pipe_unchanged() -> None:
    """Every record type, with and without an identity, comes back from the wire equal."""
    from recording.identity import EMPTY
    from recording.records import (
        AttemptRecord,
        Exchange,
        RequestRecord,
        ResponseRecord,
        StreamChunk,
        SwapRecord,
        WebSocketRecord,
        from_wire,
        to_wire,
    )

    named = Exchange("f1", "in", "POST", "https://h/x?q=1", "h", Identity(agent="a", session="s", turn="3"))
    anonymous = Exchange("f2", "out", "GET", "http://h/", "h", EMPTY)
    items = [
        RequestRecord(named, 1.5, b"POST /x HTTP/1.1\r\n\r\n", b"body", "gzip"),
        RequestRecord(anonymous, 2.0, b"GET / HTTP/1.1\r\n\r\n", None),
        ResponseRecord(
            named, 3.0, 200, b"HTTP/1.1 200 OK\r\n\r\n", b"ok", "text/plain", "br", None, False, False, b"rq"
        ),
        ResponseRecord(anonymous, 4.0, None, b"", None, error="refused", streamed=True, partial=True),
        ResponseRecord(
            named, 4.5, 200, b"HTTP/1.1 200 OK\r\n\r\n", None, streamed=True, client_bytes=7, client_left=4.25
        ),
        AttemptRecord(anonymous, 4.75, "Cannot connect to h:443: refused"),
        SwapRecord(named, 4.8, ("GITHUB_TOKEN", "OPENAI_API_KEY")),
        StreamChunk("f1", b"data: 1\n\n", "gzip", 1_700_000_000.25),
        WebSocketRecord(named, 5.0, 3, "server", b"\x00\xff"),
        WebSocketRecord(anonymous, 6.0, 3, "close", b"done", 1000),
    ]
    for item in items:
        assert from_wire(to_wire(item)) == item


def test_pretty_target_matches_mitmproxy_properties() -> None:
    """The hook's one-parse URL and host equal mitmproxy's pretty_url and pretty_host for every shape
    of request: Host with and without port, default ports, IPv6, no Host, HTTP/2 authority, `*`."""
    from mitmproxy import http

    from addons.wire.heads import pretty_target

    def make(
        scheme: str,
        host: str,
        port: int,
        path: str,
        headers: list[tuple[bytes, bytes]],
        version: str = "HTTP/1.1",
        authority: str = "",
    ) -> http.Request:
        return http.Request(
            host, port, b"GET", scheme.encode(), authority.encode(), path.encode(), version.encode(),
            http.Headers(headers), b"", None, 0.0, 0.0,
        )  # fmt: skip

    cases = [
        make("http", "10.0.0.1", 80, "/a?b=1", [(b"Host", b"example.com")]),
        make("http", "10.0.0.1", 8080, "/a", [(b"Host", b"example.com:8080")]),
        make("https", "10.0.0.1", 443, "/", [(b"host", b"example.com:443")]),
        make("https", "10.0.0.1", 443, "/", [(b"Host", b"[::1]:8443")]),
        make("http", "127.0.0.1", 9000, "/x", []),
        make("http", "127.0.0.1", 80, "*", [(b"Host", b"h")]),
        make("https", "api.openai.com", 443, "/v1/chat", [], "HTTP/2.0", "api.openai.com"),
        make("http", "h", 80, "/", [(b"Host", b"bad host!")]),
    ]
    for request in cases:
        assert pretty_target(request) == (request.pretty_url, request.pretty_host)


def test_pipe_writer_never_blocks_and_delivers_every_byte_in_order() -> None:
    """12 MiB written at once into a 1 MiB pipe: write() returns at once, the rest waits on this side
    (counted in `buffered`), and a reader gets every byte in order, then end of file after close()."""
    import asyncio
    import os
    import threading
    import time

    from recording.writer.pipe_writer import PipeWriter

    frames = [bytes([n]) * (3 * 1024 * 1024 + n) for n in range(4)]
    read_end, write_end = os.pipe()
    got = bytearray()

    def read() -> None:
        while chunk := os.read(read_end, 1 << 16):
            got.extend(chunk)
            time.sleep(0.001)  # a slow reader

    async def main() -> int:
        pipe = PipeWriter(asyncio.get_running_loop(), write_end)
        for data in frames:  # nobody reads yet: a write that waited for the pipe would never return
            pipe.write(data)
        waiting = pipe.buffered
        pipe.close()
        reader = threading.Thread(target=read)
        reader.start()
        while pipe.fd != -1:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(reader.join)
        return waiting

    waiting = asyncio.run(main())
    os.close(read_end)
    assert waiting > 0  # the writes returned with bytes still waiting: they never blocked on the reader
    assert bytes(got) == b"".join(frames)


def test_large_bodies_cross_the_pipe_beside_the_pickle_once_each() -> None:
    """A frame carries bodies over 8 KiB as buffers of their own (the request body shared by both
    records sent once) and reads back into records equal to the ones put."""
    import io

    from recording.records import Buffers, Exchange, RequestRecord, ResponseRecord, from_wire, to_wire
    from recording.writer.pipe_frames import frame, read_frame

    ex = Exchange("f", "out", "POST", "http://h/v1/chat/completions", "h", Identity(agent="a"))
    asked, answer = b"q" * 100_000, b"a" * 200_000
    items = [
        RequestRecord(ex, 1.0, b"POST / HTTP/1.1\r\n\r\n", asked),
        ResponseRecord(ex, 2.0, 200, b"HTTP/1.1 200 OK\r\n\r\n", answer, request_body=asked),
        ResponseRecord(ex, 3.0, 204, b"HTTP/1.1 204 No Content\r\n\r\n", b"small"),
    ]
    buffers: Buffers = {}
    wires = [to_wire(item, buffers) for item in items]
    ordered = [body for _, body in sorted(buffers.values(), key=lambda b: b[0])]
    assert ordered == [asked, answer]
    pieces = frame(("items", wires), ordered)
    assert sum(len(p) for p in pieces[:2]) < 2_000, "the bodies are not inside the pickle"
    read = read_frame(io.BytesIO(b"".join(pieces)))
    assert read is not None
    message, got = read
    assert [from_wire(w, got) for w in message[1]] == items
