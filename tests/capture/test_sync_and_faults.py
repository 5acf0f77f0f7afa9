"""Sync paths, the Ledger being down, upstream failures and request bodies over the limit."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.capture.test_kill_writer import writer_pid
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.upstream import Upstream, pattern, upstream

World = tuple[LiveProxy, Upstream, Ledger]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One proxy (forward + a reverse listener with a sync path, 16 KiB request limit) for this module."""
    base = tmp_path_factory.mktemp("faults")
    with upstream() as up:
        args = ["--mode", f"reverse:{up.base}@0", "--sync-path", "/hooks/*", "--max-request-body", "16k"]
        with live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy:
            ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
            yield proxy, up, ledger
            ledger.close()


UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sync_path_with_ledger_unreachable_answers_503_and_never_calls_upstream(
    home: Path, http_upstream: Upstream
) -> None:
    """Inbound request on a sync path, Ledger down: 503 + Retry-After; other paths still flow, and
    the writer process, holding their records, waits for its retries instead of spinning on a core
    (it took ~1 s of CPU a second before, for as long as the Ledger was down)."""
    args = ["--mode", f"reverse:{http_upstream.base}@0", "--sync-path", "/hooks/*"]
    args += ["--set", "flightlog_drain_timeout=1"]
    with live_proxy(home, UNREACHABLE, args=args) as proxy:
        inbound = f"http://127.0.0.1:{proxy.reverse_port('reverse:')}"
        r = httpx.post(f"{inbound}/hooks/github", content=b'{"event": "push"}', timeout=10)
        assert r.status_code == 503
        assert r.headers["Retry-After"].isdigit()
        assert http_upstream.received == [], "the upstream must not be called"
        other = httpx.get(f"{inbound}/echo", timeout=10)
        assert other.status_code == 200, "traffic keeps flowing while the Ledger is down"
        assert [x[1] for x in http_upstream.received] == ["/echo"]
        writer = writer_pid(proxy.proc.pid)
        assert writer is not None
        time.sleep(0.5)
        before = cpu_seconds(writer)
        time.sleep(2.0)
        spent = cpu_seconds(writer) - before
        assert spent < 0.3, f"the writer spent {spent:.2f} s of CPU in 2 s with the Ledger down"
        log = proxy.stop(timeout=60)
    assert "ledger unavailable" in log
    assert log.count("ledger unavailable") == 1, "one log line per change of state"


def test_sync_path_commits_request_before_forwarding(world: World) -> None:
    """With the Ledger up, the request event of a sync path is committed when the upstream sees it."""
    proxy, up, ledger = world
    session = uuid.uuid4().hex
    inbound = f"http://127.0.0.1:{proxy.reverse_port('reverse:')}"
    r = httpx.post(
        f"{inbound}/hooks/x", content=b"payload", headers={"X-Flightlog-Session": session}, timeout=10
    )
    assert r.status_code == 404 and up.received[-1][1] == "/hooks/x"  # the upstream's own answer
    committed = events_where(ledger, "kind = 'http.request' AND session = :s", {"s": session})
    assert len(committed) == 1 and committed[0].direction == "in"
    assert ledger.payload(committed[0].payload_sha256 or "") == b"payload"
    answer = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert answer.status == 404


def test_upstream_refused_is_recorded_as_the_answer_with_its_error(world: World) -> None:
    """A refused upstream connection: the client gets 502 and the answer event carries the error."""
    proxy, _, ledger = world
    session = uuid.uuid4().hex
    port = free_port()
    r = httpx.get(
        f"http://127.0.0.1:{port}/x", proxy=proxy.url, headers={"X-Flightlog-Session": session}, timeout=10
    )
    assert r.status_code == 502
    answer = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert answer.status is None and answer.payload_state == "none"
    assert answer.error and "connect call failed" in answer.error.lower()


def test_request_body_over_the_limit_is_streamed_through_and_recorded_missing(world: World) -> None:
    """A request body over --max-request-body reaches upstream intact but is not read: `missing`."""
    proxy, up, ledger = world
    session = uuid.uuid4().hex
    body = pattern(64 * 1024)
    headers = {"X-Flightlog-Session": session}
    r = httpx.post(f"{up.base}/echo", content=body, proxy=proxy.url, headers=headers, timeout=10)
    assert r.content == body and up.received[-1][3] == body
    request, answer = wait_for(ledger, "session = :s", {"s": session}, 2)
    assert request.payload_state == "missing" and request.payload_sha256 is None
    assert answer.payload_state == "complete"


def test_thousand_identical_answers_are_one_blob(world: World) -> None:
    """1,000 identical answers: 1,000 answer events, one stored blob."""
    proxy, up, ledger = world
    session = uuid.uuid4().hex
    with httpx.Client(proxy=proxy.url, headers={"X-Flightlog-Session": session}, timeout=10) as c:
        for _ in range(1000):
            assert c.get(f"{up.base}/fixed").status_code == 200
    answers = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1000)
    assert len(answers) == 1000
    assert len({a.payload_sha256 for a in answers}) == 1
    with ledger.engine.connect() as conn:
        blobs = conn.execute(
            text("SELECT count(*) FROM blobs WHERE sha256 = :s"), {"s": answers[0].payload_sha256}
        )
        assert blobs.scalar() == 1


def test_upstream_tls_failure_is_recorded_as_the_answer_with_its_error(
    world: World, https_upstream: Upstream
) -> None:
    """An upstream whose certificate mitmproxy does not trust: 502, and the error is on the answer event."""
    proxy, _, ledger = world
    session = uuid.uuid4().hex
    env_client = httpx.Client(
        proxy=proxy.url, verify=False, headers={"X-Flightlog-Session": session}, timeout=10
    )  # the client side is not what is tested here
    with env_client as c:
        r = c.get(f"{https_upstream.base}/fixed")
    assert r.status_code == 502
    answer = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert answer.status is None and answer.error and "certificate" in answer.error.lower()
    assert https_upstream.received == []


def test_identity_in_a_reverse_listeners_path_prefix_is_taken_and_stripped(world: World) -> None:
    """A client that ignores proxy variables calls the reverse listener at the base URL `flightlog run`
    gives it (`/_flightlog/agent=...;session=.../`): the upstream sees the path without the prefix,
    and both events carry the identity and the URL as forwarded."""
    proxy, up, ledger = world
    session = uuid.uuid4().hex
    port = proxy.reverse_port(up.base)
    r = httpx.get(f"http://127.0.0.1:{port}/_flightlog/agent=fetcher;session={session}/echo?q=1", timeout=10)
    assert r.status_code == 200
    assert up.received[-1][1] == "/echo?q=1"
    request, answer = wait_for(ledger, "session = :s", {"s": session}, 2)
    assert request.agent == answer.agent == "fetcher"
    assert request.url == f"{up.base}/echo?q=1"
