"""The pytest plugin, run for real with pytester: an inner test module records its agent's traffic the
first time into a Ledger file beside it, passes again with the upstream stopped (replayed, nothing
live), fails naming the difference when a prompt changes, and records again with --flightlog-record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay.conftest import AGENT
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

pytest_plugins = ["pytester"]

INNER = f"""
import os, subprocess, sys

import openai
import pytest

AGENT = {str(AGENT)!r}
PROMPT = os.environ.get("INNER_PROMPT", "What is the weather in Paris?")


@pytest.mark.flightlog("weather")
def test_agent_as_a_subprocess(flightlog_recording):
    done = subprocess.run(
        [sys.executable, AGENT, PROMPT], env={{**os.environ, **flightlog_recording.env}},
        capture_output=True, text=True, timeout=60,
    )
    print("MODE", flightlog_recording.mode)
    assert done.returncode == 0, done.stderr
    assert "final: The tool said: 18C and sunny in" in done.stdout


def test_in_process_client(flightlog_recording):
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test", max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{{"role": "user", "content": PROMPT}}]
    )
    assert answer.choices[0].message.content == "hi"
"""


def test_plugin_records_then_replays_hermetically_then_fails_on_a_miss(
    pytester: pytest.Pytester, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Record (2 + 1 requests reach the upstream), replay with the upstream stopped (passes, no new
    request), a changed prompt fails both tests with the closest-request line, and
    --flightlog-record replaces the recording (the upstream sees the requests again)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_inner=INNER)
    recordings = pytester.path / "flightlog_recordings"
    with upstream() as up:
        port = up.port
        monkeypatch.setenv("AGENT_BASE_URL", f"{up.base}/v1")
        first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=180)
        first.assert_outcomes(passed=2)
        assert len(up.received) == 3
    assert "MODE record" in first.stdout.str()
    assert sorted(p.name for p in recordings.glob("*.ledger")) == [
        "test_inner.test_in_process_client.ledger",
        "weather.ledger",
    ]

    replayed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=180)
    replayed.assert_outcomes(passed=2)
    assert "MODE replay" in replayed.stdout.str()

    monkeypatch.setenv("INNER_PROMPT", "What is the weather in Rome?")
    missed = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=180)
    missed.assert_outcomes(failed=2)
    text = missed.stdout.str()
    assert "not in recording weather.ledger" in text
    assert (
        'messages[0].content is "What is the weather in Paris?" there, "What is the weather in Rome?" here'
        in text
    )

    with upstream(port=port) as up:
        refreshed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--flightlog-record", timeout=180)
        refreshed.assert_outcomes(passed=2)
        assert len(up.received) == 3
