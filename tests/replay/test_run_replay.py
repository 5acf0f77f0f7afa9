"""`flightlog run --replay`: an agent recorded once runs again with its upstream gone, identically,
with no live call; a changed prompt is a loud miss naming the difference; `--record-missing` grows
the recording on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replay.conftest import agent, flightlog
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

ROME = "What is the weather in Rome?"


def test_recorded_agent_replays_identically_with_the_upstream_stopped(home: Path) -> None:
    """Recorded through `run`, replayed under `run --replay` after the upstream stopped: the same
    output, both requests answered from the recording, nothing live, no upstream connection tried."""
    report = str(home.parent / "report.json")
    with upstream() as up:
        env = {"AGENT_BASE_URL": f"{up.base}/v1"}
        recorded = flightlog(home, "run", "--session", "rec1", *agent(), env=env)
        assert recorded.code == 0, recorded.err
        assert len(up.received) == 2
    assert "final: The tool said: 18C and sunny in Paris" in recorded.out

    replayed = flightlog(home, "run", "--replay", "session rec1", "--report-json", report, *agent(), env=env)
    assert replayed.code == 0, replayed.err
    assert replayed.out == recorded.out
    assert replayed.report is not None
    assert replayed.report["answered"] == 2 and replayed.report["misses"] == []
    assert replayed.report["live_calls"] == 0 and replayed.report["upstream_connections_blocked"] == 0
    assert [r["strategy"] for r in replayed.report["requests"]] == ["exact", "exact"]

    changed = flightlog(
        home, "run", "--replay", "session rec1", "--report-json", report, *agent(ROME), env=env
    )
    assert changed.code == 1  # the agent's own failure: the SDK got the refusal
    assert changed.report is not None and len(changed.report["misses"]) == 1
    miss = changed.report["misses"][0]
    assert "closest recorded: POST http://127.0.0.1:" in miss
    assert 'body messages[0].content is "What is the weather in Paris?" there,' in miss
    assert '"What is the weather in Rome?" here' in miss
    assert miss in changed.err  # said on the run's stderr too, whatever the agent does with the error

    typo = flightlog(home, "run", "--replay", "sesion rec1", *agent(), env=env)
    assert typo.code == 1 and typo.out == ""  # refused before the agent starts, naming the option
    assert typo.err.startswith("flightlog: --replay 'sesion rec1': did not understand 'sesion'")


def test_record_missing_goes_live_for_misses_and_records_them(home: Path) -> None:
    """With `--record-missing` a changed prompt goes live (through a recording proxy) and is recorded;
    replaying it afterwards with the upstream stopped answers it from the Ledger."""
    report = str(home.parent / "report.json")
    with upstream() as up:
        env = {"AGENT_BASE_URL": f"{up.base}/v1"}
        assert flightlog(home, "run", "--session", "s2", *agent(), env=env).code == 0
        grown = flightlog(
            home, "run", "--session", "s2", "--replay", "session s2", "--record-missing",
            "--report-json", report, *agent(ROME), env=env,
        )  # fmt: skip
        assert grown.code == 0, grown.err
        assert grown.report is not None and grown.report["live_calls"] == 2
        assert len(up.received) == 4
    assert "Rome" in grown.out
    again = flightlog(home, "run", "--replay", "session s2", "--report-json", report, *agent(ROME), env=env)
    assert again.code == 0, again.err
    assert again.out == grown.out
    assert again.report is not None and again.report["live_calls"] == 0 and again.report["misses"] == []


SDK_CHILD = """
import openai
client = openai.OpenAI(api_key="sk-test", max_retries=0)  # OPENAI_BASE_URL from the environment
stream = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello"}],
    stream=True, stream_options={"include_usage": True},
)
print("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
"""


def test_base_url_variable_with_the_identity_prefix_is_served_like_the_recording(home: Path) -> None:
    """A client that ignores proxy variables follows OPENAI_BASE_URL to the reverse listener `run`
    points it at (with the identity path prefix, as when recording): the recorded api.openai.com
    exchange answers it, streamed, matched exactly."""
    import sys

    from storage.ledger import open_ledger
    from tests.browse.test_serve_replay import WORDS, recorded_chat

    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        recorded_chat(ledger)
    finally:
        ledger.close()
    report = str(home.parent / "report.json")
    ran = flightlog(
        home, "run", "--session", "s9", "--replay", "all", "--report-json", report,
        "--", sys.executable, "-c", SDK_CHILD,
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "".join(WORDS)
    assert ran.report is not None and [r["strategy"] for r in ran.report["requests"]] == ["exact"]
    assert ran.report["requests"][0]["url"] == "https://api.openai.com/v1/chat/completions"
