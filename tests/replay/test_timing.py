"""Streams served back by `run --replay` chunk by chunk: at once, with a fixed delay, or spread over the
recorded duration."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.replay.conftest import flightlog
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

CLIENT = str(Path(__file__).with_name("sse_client.py"))


def test_replayed_stream_keeps_its_chunks_and_the_chosen_pace(home: Path) -> None:
    """An SSE answer of 6 events recorded 30 ms apart is replayed as 6 separate events each time;
    `--chunk-delay 0.08` puts at least ~80 ms between them, `--timing recorded` spreads them over the
    recorded ~180 ms, and the default sends them one after another at once."""
    with upstream() as up:
        url = f"{up.base}/sse/6"
        recorded = flightlog(home, "run", "--session", "t", "--", sys.executable, CLIENT, url)
        assert recorded.code == 0, recorded.err
    original = json.loads(recorded.out)
    runs = {}
    for name, extra in (
        ("fast", []),
        ("fixed", ["--chunk-delay", "0.08"]),
        ("recorded", ["--timing", "recorded"]),
    ):
        ran = flightlog(home, "run", "--replay", "session t", *extra, "--", sys.executable, CLIENT, url)
        assert ran.code == 0, ran.err
        runs[name] = json.loads(ran.out)
        assert runs[name]["events"] == original["events"]
    # The client timestamps an event when it reads it: a client held off the CPU for 80 ms (a loaded
    # machine, parallel tests) reads two events in one go, a gap of 0 it did not get from the proxy.
    # So the pace is checked on most gaps and on their sum, not on every one.
    fixed = sorted(runs["fixed"]["gaps"])
    assert len(fixed) == 5 and fixed[2] >= 0.06 and sum(fixed) >= 0.3, fixed
    assert sum(runs["recorded"]["gaps"]) >= 0.1
    assert sum(runs["fast"]["gaps"]) < sum(runs["recorded"]["gaps"])
