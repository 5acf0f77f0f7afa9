"""flightlog is invisible to traffic: every shape gives the upstream and the client exactly what plain
mitmdump gives them (only the differences listed in `differential.ON_PURPOSE` allowed), and each one
flightlog carried is recorded.

The shapes (tests/capture/differential_shapes.py): HTTP/1.1 and HTTP/2 clients against HTTP/1.1 and
HTTP/2 upstreams; fixed, chunked and empty bodies both ways; `Expect: 100-continue`; HEAD, 204, 304;
gzip and br; SSE and `"stream": true` bodies (flightlog's relay); a WebSocket; uploads over 8 MiB;
and (hypothesis) heads with odd but legal shapes. bench/differential.py runs many more generated heads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.ledger import Ledger
from tests.capture.differential_shapes import (
    big_shapes,
    curl_shapes,
    h1_shapes,
    h2_shapes,
    short_shapes,
    trailer_shapes,
)
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.differential import TRAILERS_ON_PURPOSE, Shape, compare, plain_mitmdump, run
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.wire_upstream import Received, h1_upstream, h2_upstream


@dataclass
class Pair:
    mitmdump: int
    mitmdump_ca: Path
    flightlog: LiveProxy
    upstreams: dict[str, Received]
    ledger: Ledger


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("differential")
    with (
        h1_upstream() as h1,
        h1_upstream(base) as h1s,
        h2_upstream(base) as h2,
    ):
        assert h1s.cert is not None and h1s.cert == h2.cert
        trusted = h1s.cert
        args = ["--set", f"ssl_verify_upstream_trusted_ca={trusted}"]
        with (
            plain_mitmdump(base / "mitmdump", trusted) as port,
            live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy,
        ):
            ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
            yield Pair(
                port,
                base / "mitmdump" / "mitmproxy-ca-cert.pem",
                proxy,
                {"h1": h1, "h1s": h1s, "h2": h2},
                ledger,
            )
            ledger.close()


SHAPES = [
    *h1_shapes("h1"),
    *h1_shapes("h1s"),
    *h2_shapes("h1s"),
    *h2_shapes("h2"),
    *big_shapes("h1"),
    *curl_shapes("h1s"),
    *curl_shapes("h2"),
]


def _check(pair: Pair, shape: Shape) -> None:
    oracle = run(shape, pair.mitmdump, pair.upstreams, pair.mitmdump_ca)
    ours = run(shape, pair.flightlog.port, pair.upstreams, pair.flightlog.ca)
    assert b"502 Bad Gateway" not in repr(oracle.client).encode(), (
        f"{shape.name}: the oracle failed: {oracle.client!r}"[:600]
    )
    problems = compare(oracle, ours)
    assert not problems, f"{shape.name}: " + "\n".join(problems)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_shape_is_what_plain_mitmdump_gives_and_is_recorded(pair: Pair, shape: Shape) -> None:
    """The upstream and the client receive, byte for byte, what they receive through plain mitmdump;
    and flightlog recorded the exchange (its request and its answer)."""
    _check(pair, shape)
    events = wait_for(pair.ledger, "url LIKE :u", {"u": f"%shape={shape.name}%"}, 2)
    kinds = sorted(e.kind for e in events if e.kind.startswith("http."))
    assert kinds == ["http.request", "http.response"], (shape.name, kinds)


@pytest.mark.parametrize("shape", short_shapes(), ids=lambda s: s.name)
def test_a_short_answer_is_what_plain_mitmdump_gives_and_keeps_its_bytes(pair: Pair, shape: Shape) -> None:
    """An upstream that promises 1,000 bytes, sends 10 and closes: the client gets exactly what plain
    mitmdump gives it (mitmproxy's own failure), and the answer is recorded `partial` with the 10
    bytes that arrived and an error saying the upstream cut it short."""
    oracle = run(shape, pair.mitmdump, pair.upstreams, pair.mitmdump_ca)
    ours = run(shape, pair.flightlog.port, pair.upstreams, pair.flightlog.ca)
    problems = compare(oracle, ours)
    assert not problems, f"{shape.name}: " + "\n".join(problems)
    found = wait_for(pair.ledger, "kind = 'http.response' AND url LIKE :u", {"u": f"%shape={shape.name}%"}, 1)
    assert len(found) == 1, shape.name
    response = found[0]
    assert response.status == 200 and response.payload_state == "partial", (shape.name, response)
    assert pair.ledger.payload(response.payload_sha256 or "") == b"x" * 10
    assert response.error and "cut short" in response.error and "10 of 1000 bytes" in response.error


@pytest.mark.parametrize("shape", trailer_shapes(), ids=lambda s: s.name)
def test_an_answer_with_trailers_is_relayed_as_mitmdump_does_or_fails_at_once(
    pair: Pair, shape: Shape
) -> None:
    """HTTP/2 on both sides: the client gets the answer and its trailers exactly as through mitmdump,
    and the record is `complete` with the trailers after its head. HTTP/1 on either side (mitmproxy
    cannot relay trailers there): the upstream receives the same request, the client gets the clear
    failure listed in `TRAILERS_ON_PURPOSE` at once instead of mitmdump's outcome, and the answer
    event says it had trailers."""
    oracle = run(shape, pair.mitmdump, pair.upstreams, pair.mitmdump_ca)
    ours = run(shape, pair.flightlog.port, pair.upstreams, pair.flightlog.ca)
    problems = compare(oracle, ours)
    where = f"%shape={shape.name}%"
    response = wait_for(pair.ledger, "kind = 'http.response' AND url LIKE :u", {"u": where}, 1)[0]
    if shape.h2 is not None and shape.upstream == "h2":
        assert not problems, f"{shape.name}: " + "\n".join(problems)
        assert response.payload_state == "complete" and response.error is None, response
        assert pair.ledger.payload(response.payload_sha256 or "") == b"hello trailers"
        assert response.head.endswith(b"\r\n\r\nx-checksum: abc123\r\n\r\n"), response.head
        return
    assert not [p for p in problems if p.startswith("upstream")], problems
    _, mitmdump_gives, flightlog_gives = TRAILERS_ON_PURPOSE[
        "h1-client" if shape.h2 is None else "h2-client-h1-upstream"
    ]
    if isinstance(mitmdump_gives, bytes):
        assert isinstance(oracle.client, bytes) and oracle.client.startswith(mitmdump_gives), oracle.client
    else:
        assert oracle.client == mitmdump_gives, oracle.client
    assert ours.client == flightlog_gives, (
        ours.client
    )  # the failure, not the client's timeout: not left waiting
    assert response.error and "trailers" in response.error, response.error


HEADER_NAME = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-!#$%&'*+.^_`|~",
    min_size=1,
    max_size=20,
).filter(
    lambda n: (
        n.lower()
        not in {
            "host",
            "connection",
            "content-length",
            "transfer-encoding",
            "upgrade",
            "expect",
            "te",
            "keep-alive",
            "proxy-connection",
            "proxy-authorization",
            "trailer",
        }
        and not n.lower().startswith("x-flightlog")
    )
)
HEADER_VALUE = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30).map(
    lambda v: v.replace(" ", "")
)


@st.composite
def odd_heads(draw: st.DrawFn) -> Shape:
    """A legal HTTP/1.1 request with an odd head: mixed-case and repeated names, unusual methods,
    query strings with reserved characters, values with inner spaces and tabs."""
    method = draw(st.sampled_from([b"GET", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"PROPFIND"]))
    query = draw(st.text(alphabet="abcXYZ019-._~!$&'()*+,;=:@/?%", max_size=20))
    fields = draw(
        st.lists(st.tuples(HEADER_NAME, HEADER_VALUE, st.sampled_from(["", " ", "  ", "\t"])), max_size=8)
    )
    repeated = draw(st.booleans())
    lines = [
        method + b" http://{UP}/echo?shape=odd&q=" + query.replace("%", "%25").encode() + b" HTTP/1.1",
        b"Host: {UP}",
    ]
    for name, value, inner in fields:
        lines.append(f"{name}: {value[:5]}{inner}{value[5:]}".rstrip().encode())
        if repeated:
            lines.append(f"{name.upper()}: again".encode())
    body = b"odd body" if method in (b"POST", b"PUT", b"PATCH") else b""
    if body:
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"Connection: close")
    return Shape("odd", "h1", b"\r\n".join(lines) + b"\r\n\r\n" + body)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=odd_heads())
def test_odd_but_legal_heads_are_what_plain_mitmdump_gives(pair: Pair, shape: Shape) -> None:
    """Generated heads with odd but legal shapes reach the upstream, and come back, exactly as they
    do through plain mitmdump."""
    _check(pair, shape)
