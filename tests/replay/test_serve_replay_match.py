"""`flightlog serve-replay --match`: the standalone hermetic proxy with the run's strategies."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from storage.ledger import open_ledger
from tests.browse.recorded_exchanges import head, record


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
    env = {**os.environ, "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs}
    args = ["serve-replay", "--listen", "127.0.0.1:0", "--match", "exact,normalized", "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "flightlog", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        assert found, line
        with httpx.Client(proxy=f"http://127.0.0.1:{found.group(1)}", trust_env=False) as client:
            assert client.post(url, content=turn("call_LIVE99999999")).json() == {"ok": True}
            missed = client.post(url, content=turn("call_LIVE99999999", "weather in Rome?"))
            assert missed.status_code == 404
            assert 'body messages[0].content is "weather?" there' in missed.headers["X-Flightlog-Replay-Miss"]
    finally:
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    first = report["requests"][0]
    assert first["strategy"] == "normalized" and first["rules"] == ["tool_call_id"]
    assert report["requests"][1]["strategy"] is None and len(report["misses"]) == 1
