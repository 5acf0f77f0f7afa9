"""`flightlog ledger query` and `ledger ask` give one answer to one question (issue 51): the same
reading, the same object with `--json`, `--explain` on both; a question that counts, sums or ranks
is answered so by `query` too (before, `query` said "summed" and listed events). Counts say which
unit they count: 'how many calls did delta make' is 5 exchanges (10 events)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from storage.events import Batch
from storage.ledger import open_ledger
from tests.support.cli_main import Run, in_process
from tests.support.question_table import recorded_events


@pytest.fixture
def flightlog(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    """`flightlog ...` in process over the question table's recorded Ledger (SQLite)."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ledger = open_ledger(url, (tmp_path / "blobs").as_uri())
    ledger.append(Batch("t", 1, recorded_events()))
    ledger.close()
    monkeypatch.setenv("FLIGHTLOG_LEDGER", url)
    monkeypatch.setenv("FLIGHTLOG_BLOBS", (tmp_path / "blobs").as_uri())

    return in_process(monkeypatch, capsys)


QUESTIONS = [
    "how many calls did delta make",
    "which agent used the most tokens",
    "which session cost the most",
    "cost of session s4",
    "calls per model",
    "gpt4o calls on 2026-11-25",
    "claude calls that were streamed",
    "average latency by model",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_query_and_ask_answer_alike(flightlog: Callable[..., Run], question: str) -> None:
    """The same JSON object from both commands, and the same reading from --explain."""
    asked = flightlog("ledger", "ask", *question.split(), "--json")
    queried = flightlog("ledger", "query", *question.split(), "--json")
    assert asked.returncode == queried.returncode == 0, (asked.stderr, queried.stderr)
    assert json.loads(asked.stdout) == json.loads(queried.stdout)
    explained = flightlog("ledger", "ask", "--explain", *question.split())
    assert explained.returncode == 0 and explained.stdout.startswith("read as: ")
    assert flightlog("ledger", "query", "--explain", *question.split()).stdout == explained.stdout


def test_a_count_of_calls_counts_exchanges_and_says_so(flightlog: Callable[..., Run]) -> None:
    """Delta made 5 calls (10 events): the reading says what is summed and the answer gives both."""
    out = flightlog("ledger", "ask", "how", "many", "calls", "did", "delta", "make")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "read as: agent=delta, summed: exchanges"
    assert "exchanges\t5" in lines and "events\t10" in lines
    events = json.loads(
        flightlog("ledger", "ask", "how", "many", "events", "did", "delta", "make", "--json").stdout
    )
    assert (events["measure"], events["totals"]["events"]) == ("events", 10)


def test_which_agent_used_the_most_tokens_is_a_ranked_table_with_its_total(
    flightlog: Callable[..., Run],
) -> None:
    """Delta 1,550, alpha 1,180, beta 590 tokens, in that order, then the total of all three."""
    out = flightlog("ledger", "query", "which", "agent", "used", "the", "most", "tokens")
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith(
        "read as: every event, exchanges counted by agent with their total, ranked by tokens"
    )
    rows = [line.split() for line in out.stdout.splitlines()]
    assert rows[0][:3] == ["agent", "exchanges", "events"]
    assert [(r[0], r[1]) for r in rows[1:]] == [
        ("delta", "5"),
        ("alpha", "7"),
        ("beta", "5"),
        ("total", "17"),
    ]
    tokens = [int(r[3].replace(",", "")) + int(r[4].replace(",", "")) for r in rows[1:4]]
    assert tokens == [1550, 1180, 590]


def test_a_value_the_ledger_does_not_hold_is_refused_by_both(flightlog: Callable[..., Run]) -> None:
    """'gpt-5 calls' names no model the Ledger holds: one line, exit 1, from either command."""
    for command in ("ask", "query"):
        out = flightlog("ledger", command, "gpt-5", "calls")
        assert out.returncode == 1 and out.stderr.startswith(
            "flightlog: did not understand 'gpt-5' (no model"
        ), out.stderr


def test_counts_ranks_a_question_that_ranks(flightlog: Callable[..., Run]) -> None:
    """`ledger counts which session cost the most` ranks as `ask` does (its 'most' is read, never
    dropped): s4, s3, s2, s1 by cost, then the total."""
    out = flightlog("ledger", "counts", "which", "session", "cost", "the", "most", "--json")
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert [g["key"] for g in reply["groups"]][:4] == ["s4", "s3", "s2", "s1"]
    assert reply["total"]["exchanges"] == 17
