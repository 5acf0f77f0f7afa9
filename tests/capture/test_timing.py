"""Each answer says when its first and last bytes arrived after its request started, streamed AI
answers when their first token did, and the Ledger can be asked for the slowest and the slower-than."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from storage.engine import make_engine
from storage.event_reads import select_events
from storage.filters import Filter
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream


def test_answers_carry_first_and_last_byte_offsets(tmp_path: Path, http_upstream: Upstream) -> None:
    """A buffered answer, a teed stream and a relayed AI stream all get first/last byte offsets in
    order; the SSE answer (5 events 30 ms apart) ends at least 120 ms after it started; the AI stream
    has a first-token time and the plain ones none; `min_duration_ms` and `sort=slowest` read them."""
    session = uuid.uuid4().hex
    url = f"sqlite:///{tmp_path / 'l.db'}"
    headers = {"X-Flightlog-Session": session}
    with live_proxy(tmp_path / "home", url) as proxy, httpx.Client(proxy=proxy.url, timeout=10) as client:
        client.get(f"{http_upstream.base}/fixed", headers=headers)
        client.get(f"{http_upstream.base}/sse/5", headers=headers)  # teed (no stream-looking request)
        body = json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": []})
        client.post(f"{http_upstream.base}/v1/chat/completions", content=body, headers=headers)
        ledger = ledger_of(url, proxy.blobs_url)
        answers = wait_for(ledger, "kind = 'http.response' AND session = :s", {"s": session}, 3)
    by_path = {(a.url or "").rsplit("/", 1)[-1]: a for a in answers}
    for answer in answers:
        assert answer.first_byte_ms is not None and answer.last_byte_ms is not None, answer.url
        assert 0 <= answer.first_byte_ms <= answer.last_byte_ms
    assert by_path["5"].last_byte_ms is not None and by_path["5"].last_byte_ms >= 120
    assert by_path["fixed"].first_token_ms is None and by_path["5"].first_token_ms is None
    ai = by_path["completions"]
    assert ai.model == "gpt-4o-mini" and ai.first_token_ms is not None
    assert ai.first_byte_ms is not None and ai.first_byte_ms <= ai.first_token_ms <= (ai.last_byte_ms or 0)
    engine = make_engine(url)
    answers_only = {"session": session, "kind": "http.response"}
    slow = select_events(engine, Filter(**answers_only, min_duration_ms=100))
    assert [e.event_id for e in slow] == [by_path["5"].event_id]
    ranked = select_events(engine, Filter(**answers_only, sort="slowest"))
    assert ranked[0].event_id == by_path["5"].event_id and len(ranked) == 3
    engine.dispose()
    ledger.close()
