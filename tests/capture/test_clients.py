"""Real clients through the real proxy, HTTP and HTTPS: the Ledger holds the exact bytes each side saw.

The proxy's CA is trusted only through the variables `flightlog run` sets (`client_env()`), the
identity rides in the proxy URL's credentials, and the upstream is a local server with a
self-signed certificate that mitmproxy is told to trust (`ssl_verify_upstream_trusted_ca`).
"""

from __future__ import annotations

import hashlib
import os
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests

from recording.identity import Identity
from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.upstream import Upstream, pattern, upstream

BODY = pattern(3000) + b"\x00\xff tail"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveProxy, Upstream, Upstream, Ledger]]:
    """One proxy (SQLite) and two upstreams (HTTP, HTTPS) shared by the client tests of this module."""
    base = tmp_path_factory.mktemp("clients")
    with upstream() as plain, upstream(base) as tls:
        args = ["--set", f"ssl_verify_upstream_trusted_ca={base / 'upstream-cert.pem'}"]
        with live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy:
            ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
            yield proxy, plain, tls, ledger
            ledger.close()


def recorded(ledger: Ledger, session: str) -> tuple[bytes, bytes, str, str, str]:
    """(request head, response head, request sha, response sha, response state) of one session's call."""
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    assert [e.kind for e in events] == ["http.request", "http.response"], events
    request, response = events
    assert request.action_id == response.action_id
    assert request.direction == response.direction == "out"
    assert request.agent == "tester"
    return (
        request.head,
        response.head,
        request.payload_sha256 or "",
        response.payload_sha256 or "",
        response.payload_state,
    )


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_curl_bytes_and_header_order(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger], scheme: str, tmp_path: Path
) -> None:
    """curl: recorded bodies hash like the bytes sent and received; header case, order, duplicates kept.

    HTTP/1.1 on both hops (HTTP/2 has lowercase names by protocol and no wire head to keep).
    """
    proxy, plain, tls, ledger = world
    up = tls if scheme == "https" else plain
    session = uuid.uuid4().hex
    (tmp_path / "body").write_bytes(BODY)
    env = {**os.environ, **proxy.client_env(Identity(agent="tester", session=session))}
    result = subprocess.run(
        ["curl", "-sS", "--fail", "--http1.1", "-o", str(tmp_path / "out"), "-D", str(tmp_path / "head"),
         "-H", "X-Zeta: 1", "-H", "x-alpha: 2", "-H", "X-Zeta: 3",
         "-H", "Content-Type: application/octet-stream",
         "--data-binary", f"@{tmp_path / 'body'}", f"{up.base}/echo"],
        env=env, capture_output=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    request_head, response_head, request_sha, response_sha, state = recorded(ledger, session)
    assert request_sha == sha(BODY) == sha(up.received[-1][3])
    assert response_sha == sha((tmp_path / "out").read_bytes())
    assert state == "complete"
    assert b"\r\nX-Zeta: 1\r\nx-alpha: 2\r\nX-Zeta: 3\r\n" in request_head
    received_heads = (tmp_path / "head").read_bytes().split(b"\r\n\r\n")  # CONNECT's answer comes first
    assert response_head == received_heads[-2] + b"\r\n\r\n"
    assert b"Proxy-Authorization: Basic [REDACTED]" in request_head or scheme == "https"
    assert b"proxy-authorization" not in up.received[-1][2].lower(), "identity must not reach upstream"


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_requests_and_httpx(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger], scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """requests and httpx, configured only by the environment: both exchanges recorded byte-exact."""
    proxy, plain, tls, ledger = world
    up = tls if scheme == "https" else plain
    for client in ("requests", "httpx"):
        session = uuid.uuid4().hex
        for name, value in proxy.client_env(Identity(agent="tester", session=session)).items():
            monkeypatch.setenv(name, value)
        headers = {"Content-Type": "application/octet-stream", "X-Flightlog-Turn": "7"}
        if client == "requests":
            received = requests.post(f"{up.base}/bytes/70000", data=BODY, headers=headers, timeout=30).content
        else:
            with httpx.Client(trust_env=True, timeout=30) as c:
                received = c.post(f"{up.base}/bytes/70000", content=BODY, headers=headers).content
        _, _, request_sha, response_sha, state = recorded(ledger, session)
        assert request_sha == sha(BODY)
        assert response_sha == sha(received) == sha(pattern(70000))
        assert state == "complete"
        assert b"x-flightlog" not in up.received[-1][2].lower(), "X-Flightlog-* headers are stripped"
        turn = wait_for(ledger, "session = :s AND turn = '7'", {"s": session}, 2)
        assert len(turn) == 2


def test_openai_sdk_streamed_usage_and_cost(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The openai SDK over HTTPS, streamed with usage: the answer event has model, tokens and cost."""
    import openai

    proxy, _, tls, ledger = world
    session = uuid.uuid4().hex
    for name, value in proxy.client_env(Identity(agent="tester", session=session)).items():
        monkeypatch.setenv(name, value)
    client = openai.OpenAI(base_url=f"{tls.base}/v1", api_key="sk-test-not-a-key", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello!"
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    response = events[-1]
    assert response.kind == "http.response" and response.payload_state == "complete"
    assert response.error is None  # the SDK left at [DONE], before the last chunk's terminator
    assert (response.model, response.tokens_in, response.tokens_out) == ("gpt-4o-mini", 12, 3)
    assert response.cost_usd == pytest.approx((12 * 0.15 + 3 * 0.60) / 1_000_000)
    assert b"authorization: bearer [redacted]" in events[0].head.lower()
    assert b"sk-test-not-a-key" not in events[0].head


def test_anthropic_sdk_stream_is_complete_with_usage(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The anthropic SDK over HTTPS, streamed: the SDK stops reading at `message_stop`; the answer is
    `complete` with no error, its model and tokens read from the stream."""
    import anthropic

    proxy, _, tls, ledger = world
    session = uuid.uuid4().hex
    for name, value in proxy.client_env(Identity(agent="tester", session=session)).items():
        monkeypatch.setenv(name, value)
    client = anthropic.Anthropic(base_url=tls.base, api_key="sk-ant-test-not-a-key", max_retries=0)
    with client.messages.stream(
        model="claude-3-5-haiku-latest", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        text = "".join(stream.text_stream)
    assert text == "Hello!"
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    response = events[-1]
    assert response.kind == "http.response" and response.payload_state == "complete"
    assert response.error is None
    assert (response.model, response.tokens_in, response.tokens_out) == ("claude-3-5-haiku-latest", 9, 4)
    assert response.first_token_ms is not None


def test_flightlog_local_is_answered_by_the_proxy_and_never_recorded(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger],
) -> None:
    """`flightlog.local` (HTTP and HTTPS) is the proxy's own: answered by its routes (the Directory's
    agent API among them), never an event."""
    proxy, plain, _, ledger = world
    session = uuid.uuid4().hex
    headers = {"X-Flightlog-Session": session}
    r = httpx.get("http://flightlog.local/no/such/route", proxy=proxy.url, headers=headers, timeout=10)
    assert r.status_code == 404 and "/api/ledger/" in r.json()["routes"]
    with httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=proxy.ca), timeout=10) as c:
        assert c.get("https://flightlog.local/no/such/route", headers=headers).status_code == 404
        manifest = c.get("https://flightlog.local/api/directory/manifest", headers=headers)
        assert manifest.status_code == 200, manifest.text
        assert manifest.headers["content-type"].startswith("text/tab-separated-values")
    httpx.get(
        f"{plain.base}/fixed", proxy=proxy.url, headers=headers, timeout=10
    )  # a marker that is recorded
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    assert [e.host for e in events] == ["127.0.0.1", "127.0.0.1"]


def test_action_ids_are_uuid7s_in_the_order_the_requests_were_made(
    world: tuple[LiveProxy, Upstream, Upstream, Ledger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five requests one after another through the proxy: each exchange's action id is a UUIDv7 of
    when the proxy received it (within the test's clock), they sort in the order the requests were
    made, and each event id is the action id and the event's role."""
    proxy, plain, _, ledger = world
    session = uuid.uuid4().hex
    for name, value in proxy.client_env(Identity(agent="tester", session=session)).items():
        monkeypatch.setenv(name, value)
    started = time.time()
    with httpx.Client(trust_env=True, timeout=30) as c:
        for n in range(5):
            assert c.get(f"{plain.base}/bytes/{n + 1}").status_code == 200
            time.sleep(0.005)  # a new millisecond for each: the order is then the ids' alone
    ended = time.time()
    events = wait_for(ledger, "session = :s", {"s": session}, 10)
    requests_made = sorted((e for e in events if e.kind == "http.request"), key=lambda e: e.url or "")
    actions = [e.action_id for e in requests_made]
    assert [e.url for e in requests_made] == [f"{plain.base}/bytes/{n + 1}" for n in range(5)]
    assert actions == sorted(actions) and len(set(actions)) == 5
    for action in actions:
        parsed = uuid.UUID(action)
        assert parsed.version == 7 and str(parsed) == action
        assert int(started * 1000) <= parsed.int >> 80 <= int(ended * 1000)
    assert sorted(e.event_id for e in events) == sorted(
        f"{a}:{role}" for a in actions for role in ("request", "response")
    )
