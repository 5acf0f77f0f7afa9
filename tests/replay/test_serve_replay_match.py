"""`flightlog serve-replay --match`: the standalone hermetic proxy with the run's strategies."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from storage.ledger import open_ledger
from tests.browse.recorded_exchanges import head, record
from tests.support.serve_replay import serve_replay


def test_serve_replay_match_normalized_answers_a_fresh_tool_call_id_and_reports_it(
    home: Path, tmp_path: Path
) -> None:
    """A recorded turn whose tool-call id differs live is answered with `--match exact,normalized`, the
    JSON report naming `normalized` and the rule; a changed prompt gets 404 and the closest-request
    header naming the changed path."""
    ledger_url, blobs = f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri()
    ledger = open_ledger(ledger_url, blobs)

    def turn(call_id: str, prompt: str = "weather?") -> bytes:
        messages = [{"role": "user", "content": prompt}, {"role": "tool", "tool_call_id": call_id}]
        return json.dumps({"model": "m", "messages": messages}).encode()

    url = "http://api.test/v1/chat/completions"
    record(
        ledger, method="POST", url=url,
        request_head=head("POST /v1/chat/completions HTTP/1.1", [("Host", "api.test")]),
        request_body=turn("call_RECORDED0001"),
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "application/json")]),
        response_body=b'{"ok": true}',
    )  # fmt: skip
    ledger.close()
    with serve_replay(ledger_url, blobs, "--match", "exact,normalized") as served:
        client = httpx.Client(proxy=served.proxy_url, trust_env=False)
        assert client.post(url, content=turn("call_LIVE99999999")).json() == {"ok": True}
        missed = client.post(url, content=turn("call_LIVE99999999", "weather in Rome?"))
        assert missed.status_code == 404
        assert 'body messages[0].content is "weather?" there' in missed.headers["X-Flightlog-Replay-Miss"]
        client.close()
    report = served.report
    first = report["requests"][0]
    assert first["strategy"] == "normalized" and first["rules"] == ["tool_call_id"]
    assert report["requests"][1]["strategy"] is None and len(report["misses"]) == 1
