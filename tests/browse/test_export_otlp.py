"""OTLP export: exchanges recorded through the real proxy arrive in a real OTLP receiver (Arize Phoenix)
as spans with the GenAI conventions (model, tokens) and the HTTP ones, and read back from its API."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from addons.readback.errors import OtlpError
from addons.readback.export import export_otlp, plan
from addons.readback.otlp import traces_url
from addons.readback.recorded import Selection
from storage.ledger import Ledger, open_ledger
from tests.browse.recorded_exchanges import head, record
from tests.support.phoenix import phoenix
from tests.support.proxy import start_proxy
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)


def _spans(base: str, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Phoenix's spans once `count` have been ingested (it writes them asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        spans: list[dict[str, Any]] = httpx.get(
            f"{base}/v1/projects/default/spans", trust_env=False, timeout=10
        ).json()["data"]
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_recorded_exchanges_reach_phoenix_as_genai_and_http_spans(home: Path, tmp_path: Path) -> None:
    """`flightlog export --format otlp --endpoint URL`: an AI call becomes `chat MODEL` with gen_ai.*
    model and token counts, a plain GET an HTTP span with its status; each span carries the action id
    that leads back to its Ledger rows."""
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with upstream() as up:
        proxy = start_proxy(home, ledger_url)
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
                chat = client.post(
                    f"{up.base}/v1/chat/completions",
                    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                )
                plain = client.get(f"{up.base}/bytes/5")
        finally:
            proxy.stop()
    assert chat.status_code == plain.status_code == 200
    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        ids = plan(ledger, Selection(), "otlp")
        assert len(ids) == 2
        env = {**os.environ, "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": (home / "blobs").as_uri()}
        command = [sys.executable, "-m", "flightlog", "export", "--format", "otlp", "--no-progress"]
        with phoenix(tmp_path / "phoenix") as base:
            done = subprocess.run([*command, "--endpoint", base], capture_output=True, text=True, env=env)
            assert done.returncode == 0, done.stderr
            assert f"exported 2 actions as 2 otlp spans to {base}" in done.stderr
            spans = _spans(base, 2)
    finally:
        ledger.close()
    by_name = {span["name"]: span for span in spans}
    assert set(by_name) == {"chat gpt-4o-mini", "GET"}
    ai = by_name["chat gpt-4o-mini"]["attributes"]
    assert ai["gen_ai.request.model"] == "gpt-4o-mini"
    assert ai["gen_ai.operation.name"] == "chat"
    assert (ai["gen_ai.usage.input_tokens"], ai["gen_ai.usage.output_tokens"]) == (11, 7)
    assert ai["http.response.status_code"] == 200
    get = by_name["GET"]["attributes"]
    assert get["url.full"].endswith("/bytes/5")
    assert get["http.response.status_code"] == 200
    assert {ai["flightlog.action_id"], get["flightlog.action_id"]} == set(ids)


def test_an_unreachable_receiver_is_one_clear_error(sqlite_ledger: Ledger) -> None:
    """Nothing listening: OtlpError naming the traces URL, not a traceback from httpx."""
    action = record(
        sqlite_ledger, method="GET", url="http://api.example.test/x", request_head=head("GET /x HTTP/1.1", [])
    )
    with pytest.raises(OtlpError, match=r"cannot reach the OTLP receiver at http://127.0.0.1:9/v1/traces"):
        export_otlp(sqlite_ledger, [action], "http://127.0.0.1:9")


def test_traces_url_takes_a_base_or_the_full_path() -> None:
    """`--endpoint http://host:4318` and `.../v1/traces` name the same URL, as the OTel SDKs read it."""
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_endpoint_and_format_go_together(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """`--endpoint` without `--format otlp` (or otlp without it) is one clear line and exit 1."""
    env = {**os.environ, "FLIGHTLOG_LEDGER": sqlite_ledger.url, "FLIGHTLOG_BLOBS": (tmp_path / "b").as_uri()}
    for args in (["--format", "otlp"], ["--format", "har", "--endpoint", "http://127.0.0.1:9"]):
        done = subprocess.run(
            [sys.executable, "-m", "flightlog", "export", *args], capture_output=True, text=True, env=env
        )
        assert done.returncode == 1
        assert done.stderr.strip().endswith("--endpoint URL goes with --format otlp (and only with it)")
