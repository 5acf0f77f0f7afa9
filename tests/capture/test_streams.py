"""Streams: teed to the client as they arrive, and kept reading after the client leaves."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.gates import new_key, open_gate, opened_in_time
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.upstream import Upstream, upstream


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveProxy, Upstream, Ledger]]:
    """One proxy on SQLite and one upstream shared by this module's tests (each uses its own session)."""
    base = tmp_path_factory.mktemp("streams")
    with upstream() as up, live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}") as proxy:
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        yield proxy, up, ledger
        ledger.close()


def session_headers(session: str, **more: str) -> dict[str, str]:
    return {"X-Flightlog-Session": session, **more}


def test_client_leaves_after_5_of_20_events_ledger_keeps_all_20_complete(
    world: tuple[LiveProxy, Upstream, Ledger],
) -> None:
    """An SSE answer of 20 events, the client gone after 5: the proxy reads on, all 20 are stored
    (`complete`: the Ledger holds every byte the upstream sent), and the event says the client left,
    when, and how many bytes it had been passed (at least the 5 events it read, fewer than all). The
    upstream sends the last 15 only once the client has left (a gate): the 5 reached it as they came,
    and it left before the rest, whatever the machine's load."""
    proxy, http_upstream, ledger = world
    session, gate = uuid.uuid4().hex, new_key()
    got = []
    headers = session_headers(session, Accept="text/event-stream")
    with (
        httpx.Client(proxy=proxy.url, timeout=30) as client,
        client.stream("GET", f"{http_upstream.base}/sse/20?gate={gate}&after=5", headers=headers) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("data:"):
                got.append(line)
                if len(got) == 5:
                    break
    open_gate(gate)
    assert len(got) == 5 and opened_in_time(gate), "chunks reach the client as they arrive"
    events = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)
    assert len(events) == 1
    answer = events[0]
    assert answer.payload_state == "complete"
    body = ledger.payload(answer.payload_sha256 or "")
    assert body == b"".join(f"id: {i}\ndata: event {i}\n\n".encode() for i in range(20))
    assert answer.status == 200 and answer.head.startswith(b"HTTP/1.1 200")
    five = len(b"".join(f"id: {i}\ndata: event {i}\n\n".encode() for i in range(5)))
    assert answer.client_bytes is not None and five <= answer.client_bytes < len(body), answer.client_bytes
    assert answer.client_left_ms is not None and answer.client_left_ms > 0, answer.client_left_ms
    assert answer.error and answer.error.startswith(f"The client left after {answer.client_bytes} of"), answer


def test_teed_answer_without_length_is_complete(world: tuple[LiveProxy, Upstream, Ledger]) -> None:
    """A chunked answer read to its end is teed and stored whole as `complete`, memory bounded."""
    proxy, http_upstream, ledger = world
    session = uuid.uuid4().hex
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        r = client.get(f"{http_upstream.base}/sse/4", headers=session_headers(session))  # teed: no length
    assert r.status_code == 200
    answer = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 1)[0]
    assert answer.payload_state == "complete" and answer.error is None and answer.client_left_ms is None
    assert ledger.payload(answer.payload_sha256 or "") == r.content
    assert answer.client_bytes == len(r.content)


def test_large_answer_is_spooled_to_the_blob_store(
    home: Path, tmp_path: Path, http_upstream: Upstream
) -> None:
    """A 3 MiB answer (over the inline limit) is teed, spooled and stored in the blob folder byte-exact."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}") as proxy:
        with httpx.Client(proxy=proxy.url, timeout=20) as client:
            r = client.get(f"{http_upstream.base}/bytes/{3 * 1024 * 1024}")
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        answer = wait_for(ledger, "kind = 'http.response'", {}, 1)[0]
        assert answer.payload_state == "complete" and answer.payload_size == len(r.content)
        assert ledger.payload(answer.payload_sha256 or "") == r.content
        ledger.close()


def test_proxy_records_to_sqlite_and_postgresql(
    home: Path, ledger_url: str, http_upstream: Upstream, tmp_path: Path
) -> None:
    """The same proxy records a stream to either Ledger; the pair shares one action id."""
    with live_proxy(home, ledger_url, blobs_url=(tmp_path / "blobs").as_uri()) as proxy:
        with httpx.Client(proxy=proxy.url, timeout=10) as client:
            r = client.get(f"{http_upstream.base}/sse/3", headers={"Accept": "text/event-stream"})
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        request, answer = wait_for(ledger, "1 = 1", {}, 2)
        assert request.action_id == answer.action_id
        assert answer.payload_state == "complete" and answer.error is None
        assert ledger.payload(answer.payload_sha256 or "") == r.content
        ledger.close()
