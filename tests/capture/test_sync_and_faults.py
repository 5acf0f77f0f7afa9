"""Sync paths, the Ledger being down, upstream failures and request bodies over the limit."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream, pattern

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sync_path_with_ledger_unreachable_answers_503_and_never_calls_upstream(
    home: Path, http_upstream: Upstream
) -> None:
    """Inbound request on a sync path, Ledger down: 503 + Retry-After; other paths still flow."""
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
        log = proxy.stop(timeout=60)
    assert "ledger unavailable" in log
    assert log.count("ledger unavailable") == 1, "one log line per change of state"


def test_sync_path_commits_request_before_forwarding(
    home: Path, tmp_path: Path, http_upstream: Upstream
) -> None:
    """With the Ledger up, the request event of a sync path is committed when the upstream sees it."""
    args = ["--mode", f"reverse:{http_upstream.base}@0", "--sync-path", "/hooks/*"]
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}", args=args) as proxy:
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        inbound = f"http://127.0.0.1:{proxy.reverse_port('reverse:')}"
        r = httpx.post(f"{inbound}/hooks/x", content=b"payload", timeout=10)
        assert r.status_code == 404  # the upstream's own answer: it was called
        committed = events_where(ledger, "kind = 'http.request'", {})
        assert len(committed) == 1 and committed[0].direction == "in"
        assert ledger.payload(committed[0].payload_sha256 or "") == b"payload"
        assert wait_for(ledger, "kind = 'http.response'", {}, 1)[0].status == 404
        ledger.close()


def test_upstream_refused_is_recorded_as_the_answer_with_its_error(home: Path, tmp_path: Path) -> None:
    """A refused upstream connection: the client gets 502 and the answer event carries the error."""
    port = free_port()
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}") as proxy:
        r = httpx.get(f"http://127.0.0.1:{port}/x", proxy=proxy.url, timeout=10)
        assert r.status_code == 502
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        answer = wait_for(ledger, "kind = 'http.response'", {}, 1)[0]
        assert answer.status is None and answer.payload_state == "none"
        assert answer.error and "connect call failed" in answer.error.lower()
        ledger.close()


def test_request_body_over_the_limit_is_streamed_through_and_recorded_missing(
    home: Path, tmp_path: Path, http_upstream: Upstream
) -> None:
    """A request body over --max-request-body reaches upstream intact but is not read: `missing`."""
    body = pattern(64 * 1024)
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}", args=["--max-request-body", "16k"]) as proxy:
        r = httpx.post(f"{http_upstream.base}/echo", content=body, proxy=proxy.url, timeout=10)
        assert r.content == body and http_upstream.received[-1][3] == body
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        request, answer = wait_for(ledger, "1 = 1", {}, 2)
        assert request.payload_state == "missing" and request.payload_sha256 is None
        assert answer.payload_state == "complete"
        ledger.close()


def test_thousand_identical_answers_are_one_blob(home: Path, tmp_path: Path, http_upstream: Upstream) -> None:
    """1,000 identical answers: 1,000 answer events, one stored blob."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}") as proxy:
        with httpx.Client(proxy=proxy.url, timeout=10) as c:
            for _ in range(1000):
                assert c.get(f"{http_upstream.base}/fixed").status_code == 200
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        answers = wait_for(ledger, "kind = 'http.response'", {}, 1000)
        assert len(answers) == 1000
        assert len({a.payload_sha256 for a in answers}) == 1
        from sqlalchemy import text

        with ledger.engine.connect() as conn:
            blobs = conn.execute(
                text("SELECT count(*) FROM blobs WHERE sha256 = :s"), {"s": answers[0].payload_sha256}
            )
            assert blobs.scalar() == 1
        ledger.close()
