"""Truth on the agent's own path: every door x every answer shape, through flightlog and through plain
mitmdump, and the Ledger's record held against what the client saw.

Doors (tests/support/paths.py): forward HTTP, CONNECT + TLS, HTTP/2, a reverse listener, a model API
listener, and that listener reached through the forward listener (absolute-form, and a CONNECT
tunnel carrying plain HTTP). Shapes: JSON, an event stream
fast and slow (5 events 100 ms apart), chunked, gzip, odd framing (a short body, Content-Length with
Transfer-Encoding, two Content-Lengths, a `+5` chunk size, a head with bare LF line ends), a client
that leaves after the first event, and an upstream that refuses the connection. A new door or shape
is one entry.

For each pair: the client gets the same status, head and bytes as through plain mitmdump (the
oracle streams what flightlog streams: tests/support/stream_oracle.py), a streamed answer is passed
on as it comes (the upstream sends its first chunk and waits for the client's word that it holds it
before sending the rest: tests/support/gates.py), and the Ledger's answer says what the client got:
its status, its bytes (`client_bytes`, and the payload itself when the client stayed), a client that
left (`client_left_ms`, with the whole answer still read), a failure (its error), and a first byte
stamped when it went (before the client's pause, not at the answer's end). No clock decides: how
fast each door is goes in `python -m bench paths`.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage.events import StoredEvent
from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.support.differential import plain_mitmdump
from tests.support.gates import new_key, opened_in_time
from tests.support.paths import DOORS, Proxy, Seen, Upstreams, visit
from tests.support.proxy import live_proxy
from tests.support.wire_upstream import h1_upstream, h2_upstream

ORACLE = Path(__file__).parents[1] / "support" / "stream_oracle.py"
HOLD = 0.3
"""Seconds the client waits, holding a gated answer's first chunk, before it lets the upstream go on: the
Ledger's first byte must be that much before its last (stamped when it went, not at the end)."""


@dataclass(frozen=True)
class Shape:
    name: str
    path: str
    leave_after: int | None = None
    down: bool = False
    gated: bool = False
    """Several chunks: the upstream sends the rest only once the client holds the first."""
    h1_only: bool = False
    """Odd HTTP/1 framing: an HTTP/2 upstream has none."""


SHAPES = [
    Shape("json", "/fixed"),
    Shape("sse-fast", "/sse", gated=True),
    Shape("sse-slow", "/sse-slow", gated=True),
    Shape("chunked", "/chunked", gated=True),
    Shape("gzip", "/gzip"),
    Shape("short", "/short"),
    Shape("cl-te", "/cl-te", h1_only=True),
    Shape("two-cl", "/two-cl", h1_only=True),
    Shape("chunk-plus", "/chunk-plus", h1_only=True),
    Shape("bare-lf", "/bare-lf", h1_only=True),
    Shape("client-leaves", "/sse-slow", leave_after=1, gated=True),
    Shape("upstream-down", "/x", down=True),
]
PAIRS = [(door, shape) for door in DOORS for shape in SHAPES if not (door == "h2" and shape.h1_only)]


@dataclass
class World:
    flightlog: Proxy
    mitmdump: Proxy
    upstreams: Upstreams
    ledger: Ledger


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One flightlog and one plain mitmdump with the same listeners, the upstreams they reach, and a
    port that refuses connections (the upstream that is down)."""
    base = tmp_path_factory.mktemp("paths")
    with h1_upstream() as h1, h1_upstream(base) as h1s, h2_upstream(base) as h2, socket.socket() as down:
        down.bind(("127.0.0.1", 0))
        ups = Upstreams(h1.port, h1s.port, h2.port, down.getsockname()[1])
        cert = base / "upstream-cert.pem"
        to_h1, to_down = f"http://127.0.0.1:{ups.h1}", f"http://127.0.0.1:{ups.down}"
        rev, rev_down = _free_port(), _free_port()
        oracle_modes = [
            "--mode",
            "regular",
            "--mode",
            f"reverse:{to_h1}@{rev}",
            "--mode",
            f"reverse:{to_down}@{rev_down}",
        ]
        args = [
            "--mode", f"reverse:{to_h1}@0", "--mode", f"reverse:{to_down}@0",
            "--ai-upstream", f"openai={to_h1}", "--ai-upstream", f"anthropic={to_down}",
            "--set", f"ssl_verify_upstream_trusted_ca={cert}", "--set", "flightlog_stream_grace=5",
        ]  # fmt: skip
        with (
            plain_mitmdump(base / "mitmdump", cert, *oracle_modes, "-s", str(ORACLE)) as forward,
            live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy,
        ):
            ours = Proxy(
                proxy.port,
                proxy.reverse_port(f"127.0.0.1:{ups.h1}"),
                proxy.reverse_port(f"127.0.0.1:{ups.down}"),
                proxy.ca,
                proxy.ai_port("openai"),
                proxy.ai_port("anthropic"),
            )
            oracle = Proxy(forward, rev, rev_down, base / "mitmdump" / "mitmproxy-ca-cert.pem")
            ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
            yield World(ours, oracle, ups, ledger)
            ledger.close()


CLOSED = frozenset({"empty reply", "ConnectionResetError"})
"""A connection closed with no answer: a reset or an end of file, as the kernel's timing has it (the
request still unread when the proxy closes makes it a reset), through either proxy."""


def _outcome(seen: Seen) -> tuple[object, ...]:
    return (seen.status, seen.head, seen.body, "closed" if seen.failure in CLOSED else seen.failure)


@pytest.mark.parametrize(("door", "shape"), PAIRS, ids=[f"{d}-{s.name}" for d, s in PAIRS])
def test_the_client_sees_what_mitmdump_gives_it_and_the_ledger_says_what_it_saw(
    world: World, door: str, shape: Shape
) -> None:
    """See the module's docstring: the same outcome as through plain mitmdump, a stream passed on
    as it comes, and a record of exactly what the client got."""
    tag = f"{door}-{shape.name}-{uuid.uuid4().hex[:8]}"
    session = tag if door.startswith("model") else ""
    down, connect = world.upstreams.down, "kind = 'http.response' AND method = 'CONNECT' AND url = :u"
    refused = {  # a failure before any request: where it is recorded instead of under the request's URL
        "reverse": ("kind = 'connection.error' AND url = :u", {"u": f"http://127.0.0.1:{down}"}),
        "model": ("kind = 'connection.error' AND url = :u", {"u": f"http://127.0.0.1:{down}"}),
        "connect-tls": (connect, {"u": f"127.0.0.1:{down}"}),
        "h2": (connect, {"u": f"127.0.0.1:{down}"}),
        "model-connect": (connect, {"u": f"127.0.0.1:{down}"}),
    }
    where, params = refused.get(door, ("0 = 1", {}))
    before = len(events_where(world.ledger, where, params))
    common = {"down": shape.down, "leave_after": shape.leave_after}
    theirs, mine = (new_key() if shape.gated else None for _ in range(2))
    gated = {key: f"gate={key}&" if key else "" for key in (theirs, mine)}  # the tag stays the URL's end
    oracle_path = f"{shape.path}?{gated[theirs]}shape={tag}-oracle"
    oracle = visit(door, oracle_path, world.mitmdump, world.upstreams, gate=theirs, **common)
    ours = visit(
        door, f"{shape.path}?{gated[mine]}shape={tag}", world.flightlog, world.upstreams,
        session=session, gate=mine, hold=HOLD, **common,
    )  # fmt: skip

    if shape.leave_after is None:
        assert _outcome(ours) == _outcome(oracle), f"flightlog: {ours}\nmitmdump: {oracle}"
    else:  # the client read what it wanted and left: the same, as far as it read
        assert (ours.status, ours.head, ours.left) == (oracle.status, oracle.head, True), (ours, oracle)
    if mine is not None and not shape.down:  # the client held (or left after) chunk 1 before chunk 2 went
        assert opened_in_time(mine), f"{door}: the first chunk never reached the client before the rest"
        assert opened_in_time(theirs), f"{door}: mitmdump held the stream back (the oracle is wrong)"

    if shape.down and door in refused:  # the listener's (or the tunnel's) upstream connection failed first
        found = wait_for(world.ledger, where, params, before + 1)
        assert len(found) == before + 1, found
        assert found[-1].error and "Connect call failed" in found[-1].error, found[-1]
        return
    answer = _answer(world.ledger, tag)
    _holds_what_the_client_saw(world.ledger, answer, ours, shape)
    if shape.gated and not ours.left:  # the first byte was stamped before the client's pause, not after
        assert answer.first_byte_ms is not None and answer.last_byte_ms is not None, answer
        assert answer.last_byte_ms - answer.first_byte_ms >= HOLD * 1000, answer


def _answer(ledger: Ledger, tag: str) -> StoredEvent:
    events = wait_for(ledger, "url LIKE :u", {"u": f"%shape={tag}"}, 2)
    kinds = [e.kind for e in events]
    assert kinds == ["http.request", "http.response"], events
    return events[1]


def _holds_what_the_client_saw(ledger: Ledger, answer: StoredEvent, seen: Seen, shape: Shape) -> None:
    payload = ledger.payload(answer.payload_sha256) if answer.payload_sha256 else b""
    if answer.status != seen.status:  # the upstream's answer (if any) never reached the client
        assert answer.error and answer.error.endswith("the client was sent the proxy's error answer instead")
        assert seen.status == 502 and answer.client_bytes in (None, 0), (seen, answer)
        return
    if seen.left:
        assert answer.client_left_ms is not None, answer
        assert answer.payload_state == "complete", answer  # read to its end for the Ledger (the grace)
        assert answer.client_bytes is not None and answer.client_bytes >= len(seen.body), answer
        assert payload.startswith(seen.body) and len(payload) > answer.client_bytes, (payload, seen.body)
        assert answer.error and answer.error.startswith("The client left after"), answer.error
        return
    assert answer.client_left_ms is None, answer
    assert answer.client_bytes == len(seen.body), (answer.client_bytes, seen)
    assert payload == seen.body, (payload, seen.body)
    if answer.payload_state == "partial":  # cut: the bytes that came, and why it stopped
        assert answer.error, answer
    else:
        assert answer.payload_state in ("complete", "none") and answer.error is None, answer
