"""End to end: an openai SDK streamed chat completion recorded through the live flightlog proxy, then
served back by serve-replay with the upstream never called, replayed through the proxy to the upstream
with the key filled from the secrets file, and exported as valid HAR."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import jsonschema
import openai

from addons.serve_replay import concealer
from readback.export import export, plan
from readback.recorded import Selection, select_action_ids
from storage.ledger import open_ledger
from tests.browse.test_serve_replay import WORDS, ask, serve_replay, sse_chunks
from tests.browse.upstream import Reply, upstream
from tests.support.proxy import live_proxy

KEY = "sk-live-e2e-5b7d1c90aa"
SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "har-1.2.schema.json").read_text())


def streamed(client: openai.OpenAI) -> str:
    return "".join(c.choices[0].delta.content or "" for c in ask(client) if c.choices)


def test_recorded_through_the_proxy_then_served_replayed_and_exported(home: Path, tmp_path: Path) -> None:
    """The recording holds [OPENAI_API_KEY], never the key; serve-replay answers the same SDK call from it
    with the upstream seeing nothing; replay sends it again with the key; HAR validates."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"OPENAI_API_KEY={KEY}\n")
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    blobs = (tmp_path / "blobs").as_uri()
    fields = [("Content-Type", "text/event-stream")]
    with upstream(lambda _: Reply(200, fields, chunks=sse_chunks())) as up:
        with live_proxy(home, ledger_url, blobs_url=blobs, args=["--secrets", str(secrets)]) as proxy:
            http_client = httpx.Client(proxy=proxy.url, trust_env=False)
            client = openai.OpenAI(
                api_key=KEY, base_url=f"{up.url}/v1", http_client=http_client, max_retries=0
            )
            assert streamed(client) == "".join(WORDS)
            client.close()
        assert len(up.seen) == 1

        ledger = open_ledger(ledger_url, blobs)
        try:
            (action,) = select_action_ids(ledger.engine, Selection())
            request = next(e for e in ledger.action(action) if e.kind == "http.request")
            assert b"[OPENAI_API_KEY]" in request.head and KEY.encode() not in request.head

            with serve_replay(
                ledger, tmp_path / "conf", conceal=concealer({"OPENAI_API_KEY": KEY})
            ) as running:
                http_client = httpx.Client(proxy=running.proxy, trust_env=False)
                client = openai.OpenAI(
                    api_key=KEY, base_url=f"{up.url}/v1", http_client=http_client, max_retries=0
                )
                assert streamed(client) == "".join(WORDS)
                client.close()
            assert len(up.seen) == 1  # served from the Ledger: the upstream heard nothing
            assert running.addon.report is not None and len(running.addon.report.by_body) == 1

            with live_proxy(home, ledger_url, blobs_url=blobs, args=["--secrets", str(secrets)]):
                env = {**os.environ, "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs}
                args = ["replay", action, "--via-proxy", "--secrets", str(secrets), "--json"]
                done = subprocess.run(
                    [sys.executable, "-m", "flightlog", *args],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=60,
                )
            assert done.returncode == 0, done.stderr
            result = json.loads(done.stdout)
            assert len(up.seen) == 2  # sent again, through the recording proxy this time
            assert ("authorization", f"Bearer {KEY}") in [(n.lower(), v) for n, v in up.seen[1].fields]
            assert up.seen[1].body == up.seen[0].body
            assert result["status"] == {"recorded": "200 OK", "replayed": "200 OK"}
            assert result["body_diff"] == []
            assert {e.parent for e in ledger.action(result["replay"])} == {action}

            out = io.BytesIO()
            export(ledger, "har", plan(ledger, Selection(), "har"), out)
            har = json.loads(out.getvalue())
            jsonschema.validate(har, SCHEMA)
            entries = har["log"]["entries"]
            assert len(entries) == 3  # the recording, the replay's own record, the proxy's record of it
            assert [e["_flightlog"].get("parent") for e in entries].count(action) == 1
            assert KEY not in out.getvalue().decode()
        finally:
            ledger.close()
