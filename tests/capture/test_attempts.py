"""Every attempt is an event: an agent's request that never reached its upstream leaves a record, on
every listener, and the client sees what plain mitmdump (with the same listeners) shows it.

One row per way of failing (a refused port, a name that does not resolve, a client that refuses the
proxy's certificate) and per door (forward HTTP, CONNECT, a reverse listener, a model API listener
directly and through the forward listener): a new door or failure is one row.
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.support.differential import plain_mitmdump
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.upstream import Upstream, upstream


@dataclass
class World:
    flightlog: LiveProxy
    mitmdump: dict[str, int]
    mitmdump_ca: Path
    closed: int
    tls: Upstream
    ledger: Ledger


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """flightlog and plain mitmdump, each with a forward listener and a reverse listener whose
    target refuses connections (flightlog's as its OpenAI listener too), and a TLS upstream."""
    base = tmp_path_factory.mktemp("attempts")
    with socket.socket() as closed, upstream(base) as tls:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connecting is refused
        port = closed.getsockname()[1]
        reverse_port = _free_port()
        modes = ["--mode", "regular", "--mode", f"reverse:http://127.0.0.1:{port}@{reverse_port}"]
        args = [
            "--mode",
            f"reverse:http://127.0.0.1:{port}@0",
            "--ai-upstream",
            f"openai=http://127.0.0.1:{port}",
        ]
        with (
            plain_mitmdump(base / "mitmdump", base / "upstream-cert.pem", *modes) as forward,
            live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy,
        ):
            ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
            yield World(
                proxy,
                {"forward": forward, "reverse": reverse_port},
                base / "mitmdump" / "mitmproxy-ca-cert.pem",
                port,
                tls,
                ledger,
            )
            ledger.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Row:
    name: str
    door: str
    """forward, reverse, ai (the model listener directly) or ai-forward (through the forward one)."""
    url: str
    """`{CLOSED}` is the refusing port, `{TLS}` the TLS upstream's."""
    trust: bool = True
    """Whether the client trusts the proxy's CA."""
    kinds: tuple[str, ...] = ("http.request", "http.response")
    error: str = "Connect call failed"


ROWS = [
    Row("forward-http-refused", "forward", "http://127.0.0.1:{CLOSED}/x"),
    Row("connect-refused", "forward", "https://127.0.0.1:{CLOSED}/x"),
    Row(
        "connect-dns", "forward", "https://flightlog-test.invalid/x", error="Cannot connect to flightlog-test"
    ),
    Row(
        "client-refuses-ca",
        "forward",
        "https://localhost:{TLS}/fixed",
        trust=False,
        kinds=("connection.error",),
        error="does not trust the proxy's certificate",
    ),
    Row("reverse-refused", "reverse", "/x", kinds=("connection.error",)),
    Row("ai-refused", "ai", "/v1/x", kinds=("connection.error",)),
    Row("ai-forward-refused", "ai-forward", "/v1/x"),
]


def _curl(world: World, row: Row, ours: bool, session: str) -> tuple[str, str]:
    """(HTTP status or 000, curl's exit code) of the row's request through one of the proxies."""
    url = row.url.replace("{CLOSED}", str(world.closed)).replace("{TLS}", str(world.tls.port))
    ca = world.flightlog.ca if ours else world.mitmdump_ca
    forward = world.flightlog.port if ours else world.mitmdump["forward"]
    proxy = f"http://session={session}:@127.0.0.1:{forward}" if ours else f"http://127.0.0.1:{forward}"
    argv = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "15"]
    if row.trust:
        argv += ["--cacert", str(ca)]
    if row.door == "forward":
        argv += ["-x", proxy, url]
    elif row.door == "ai-forward" and not ours:  # flightlog takes it as the listener's: to its target
        argv += ["-x", proxy, f"http://127.0.0.1:{world.closed}{url}"]
    else:
        port = world.flightlog.ai_port("openai") if ours else world.mitmdump["reverse"]
        if row.door == "reverse" and ours:
            port = world.flightlog.reverse_port(f"127.0.0.1:{world.closed}")
        prefix = f"/_flightlog/session={session}" if ours and row.door.startswith("ai") else ""
        target = f"http://127.0.0.1:{port}{prefix}{url}"
        argv += ["-x", proxy, target] if row.door == "ai-forward" else [target]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    return done.stdout, CLOSED.get(done.returncode, str(done.returncode))


CLOSED = {52: "closed", 56: "closed"}
"""curl's empty reply (52) and reset (56) are one outcome, a connection closed with no answer: which
one the client meets is the kernel's timing (its request still unread when the proxy closes)."""


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_a_failed_attempt_is_recorded_and_the_client_sees_what_mitmdump_shows(world: World, row: Row) -> None:
    """The client's outcome (status, curl's exit code) equals plain mitmdump's; the Ledger holds the
    attempt: the request and its failure, or, where no request was ever read, a `connection.error`
    naming the target; the error says why."""
    session = uuid.uuid4().hex
    where, like = "kind = 'connection.error' AND error LIKE :e", {"e": f"%{row.error}%"}
    before = len(events_where(world.ledger, where, like))
    ours = _curl(world, row, True, session)
    oracle = _curl(world, row, False, session)
    assert ours == oracle, (ours, oracle)
    if row.kinds == ("connection.error",):  # no request was read: nothing carries the session
        found = wait_for(world.ledger, where, like, before + 1)
        assert len(found) == before + 1 and found[-1].url and found[-1].host, found
        return
    events = wait_for(world.ledger, "session = :s", {"s": session}, len(row.kinds))
    assert tuple(e.kind for e in events) == row.kinds, events
    answer = events[-1]
    assert answer.status is None and answer.error and row.error in answer.error, answer.error
