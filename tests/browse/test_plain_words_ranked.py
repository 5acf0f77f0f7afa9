"""Plain words of issue 51 beside the question table: times of day and their limits, the shapes of a
ranking, models by spelling, family or a word of their name, quotes of any kind, and the questions
that have no one reading, refused saying why (never one picked)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from storage.questions.known import KnownValues
from storage.questions.reading import QuestionError, ask

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
KNOWN = KnownValues(
    {
        "agent": ["alpha", "beta"],
        "model": ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "claude-3-5-haiku"],
        "host": ["api.openai.com", "api.anthropic.com"],
        "session": ["s1", "s4"],
    }
)
D = "2026-11-25T"
Y = "2026-11-24T00:00:00Z"
LISTED = ("events", None, None, False, None, None, "exchanges")


def ranked(
    view: str, by: str | None, rank: str | None, least: bool = False, limit: int | None = None
) -> tuple[Any, ...]:
    return (view, by, rank, least, limit, None, "events" if rank in ("tokens",) else "exchanges")


# (question, the filter's wire form, (view, group_by, rank, ascending, limit, measure, counting))
READINGS: list[tuple[str, dict[str, Any], tuple[Any, ...]]] = [
    ("calls after noon", {"since": f"{D}12:00:00Z"}, LISTED),
    ("calls before midnight", {"since": f"{D}00:00:00Z", "until": f"{D}00:00:00Z"}, ()),
    ("errors after 3 pm", {"status": "errors", "since": f"{D}15:00:00Z"}, ()),
    ("calls since 9:30am", {"since": f"{D}09:30:00Z"}, ()),
    ("calls until 14:15 on monday", {"since": "2026-11-23T00:00:00Z", "until": "2026-11-23T14:15:00Z"}, ()),
    ("tokens per agent", {}, ranked("groups", "agent", "tokens")),
    ("top 2 sessions", {}, ranked("groups", "session", "exchanges", limit=2)),
    ("the quietest hour today", {"since": f"{D}00:00:00Z"}, ranked("groups", "hour", "exchanges", True)),
    ("which model has the highest p95 latency", {}, ranked("stats", "model", "p95")),
    ("fastest model", {}, ranked("stats", "model", "avg", True)),
    ("agents by calls", {}, ranked("groups", "agent", "exchanges")),
    ("calls that cost the most", {"sort": "costliest"}, LISTED),
    ("calls that took the most time", {"sort": "slowest"}, LISTED),
    ("most recent calls", {"sort": "newest"}, LISTED),
    ("claude models", {"models": ["claude-3-5-haiku", "claude-sonnet-4-5"]}, ()),
    ("anthropic calls", {"host": "api.anthropic.com"}, ()),
    ("model claude", {"models": ["claude-3-5-haiku", "claude-sonnet-4-5"]}, ()),
    ("Claude-Sonnet-4.5 calls", {"model": "claude-sonnet-4-5"}, ()),
    ("mini calls", {"model": "gpt-4o-mini"}, ()),
    ("errors from agent \u2018omega\u2019", {"agent": "omega", "status": "errors"}, ()),
    ("calls to 'api.example.org'", {"host": "api.example.org"}, ()),
    ("streamed answers today", {"streamed": True, "since": f"{D}00:00:00Z"}, ()),
    ("cost per call today", {"since": f"{D}00:00:00Z"}, ("stats", None, None, False, None, None, "events")),
    ("cost of session s4", {"session": "s4"}, ("totals", None, None, False, None, "cost", "events")),
    (
        "number of events yesterday",
        {"since": Y, "until": f"{D}00:00:00Z"},
        ("totals", None, None, False, None, "events", "events"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("question", "expected", "shape"), READINGS, ids=[q for q, _, _ in READINGS])
def test_reads_exactly_so(question: str, expected: dict[str, Any], shape: tuple[Any, ...]) -> None:
    """The filter exactly, and where given the shape: view, grouping, rank and its order, limit, the
    total's measure and what a count counts."""
    if question == "calls before midnight":  # midnight of today is where today begins: nothing before
        with pytest.raises(QuestionError, match="is not before until"):
            ask(question, NOW, KNOWN)
        return
    q = ask(question, NOW, KNOWN)
    assert q.filter.to_json() == expected, q.explain()
    if shape:
        got = (q.view, q.group_by, q.rank, q.ascending, q.limit, q.measure, q.unit)
        assert got == shape, q.explain()


def test_the_reading_says_what_a_word_matched() -> None:
    """A model named otherwise than the Ledger spells it is said in the reading."""
    assert ask("gpt4o calls", NOW, KNOWN).explain() == (
        "read as: model=gpt-4o, gpt4o = model gpt-4o, events listed (a request and its answer are two)"
    )
    assert "claude = model claude-3-5-haiku or claude-sonnet-4-5" in ask("claude calls", NOW, KNOWN).explain()


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("calls last week after 3pm", "a time of day needs one day"),
        ("calls between 3pm and 1pm", "is not before until"),
        ("calls between 1pm 2pm", "needs 'and' and a second time of day, not '2pm'"),
        ("calls after 13pm", "not '13pm'"),
        ("most tokens", "'most' ranks counted rows"),
        ("cheapest calls", "'least' ranks counted rows"),
        ("largest sessions", "ranked by most or least, not 'largest'"),
        ("gpt-4o claude calls", "one question takes one model"),
        ("which agent used the most and the least tokens", "one ranking per question"),
        ("calls to gpt-5", "did not understand 'gpt-5' (no model of that name in the Ledger"),
        ("calls to api.example.org", "did not understand 'api.example.org' (no host of that name"),
        ("kind frobs", "did not understand 'frobs' (no kind of that name"),
        ("method FETCH", "did not understand 'FETCH' (not an HTTP method"),
    ],
)
def test_no_one_reading_is_refused_saying_why(question: str, reason: str) -> None:
    """Refused in one line saying why; never one reading picked."""
    with pytest.raises(QuestionError) as e:
        ask(question, NOW, KNOWN)
    assert reason in str(e.value), str(e.value)
