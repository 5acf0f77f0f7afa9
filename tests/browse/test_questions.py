"""Realistic questions in plain words and the exact filter and view each must produce (issue 13):
durations and order, bare model names, "which tools", refusals, hosts and statuses; and the words
that were silently dropped before are now either understood or refused naming them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from storage.questions.reading import QuestionError, ask

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
TODAY = "2026-11-25T00:00:00Z"
YESTERDAY = "2026-11-24T00:00:00Z"
HOUR_AGO = "2026-11-25T14:42:00Z"

# (question, the filter's wire form exactly, the view, the counted key or None)
QUESTIONS: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("slowest calls", {"sort": "slowest"}, "events", None),
    ("slowest calls today", {"sort": "slowest", "since": TODAY}, "events", None),
    ("calls slower than 1 second", {"min_duration_ms": 1000}, "events", None),
    ("requests slower than 250ms", {"min_duration_ms": 250}, "events", None),
    ("calls that took over 2s", {"min_duration_ms": 2000}, "events", None),
    ("calls taking more than 1.5 seconds", {"min_duration_ms": 1500}, "events", None),
    ("calls faster than 100 ms", {"max_duration_ms": 100}, "events", None),
    ("calls under 300ms", {"max_duration_ms": 300}, "events", None),
    ("requests longer than a minute", {"min_duration_ms": 60000}, "events", None),
    (
        "at least two seconds to api.openai.com",
        {"min_duration_ms": 2000, "host": "api.openai.com"},
        "events",
        None,
    ),
    (
        "slowest calls to api.anthropic.com yesterday",
        {"sort": "slowest", "host": "api.anthropic.com", "since": YESTERDAY, "until": TODAY},
        "events",
        None,
    ),
    ("fastest responses", {"sort": "fastest"}, "events", None),
    (
        "most expensive calls this week",
        {"sort": "costliest", "since": "2026-11-23T00:00:00Z"},
        "events",
        None,
    ),
    ("largest responses", {"sort": "largest"}, "events", None),
    ("oldest events", {"sort": "oldest"}, "events", None),
    ("how much did gpt-4o cost today", {"model": "gpt-4o", "since": TODAY}, "totals", None),
    (
        "how many tokens did claude-sonnet-4-5 use yesterday".replace(" use ", " used "),
        {"model": "claude-sonnet-4-5", "since": YESTERDAY, "until": TODAY},
        "totals",
        None,
    ),
    ("gpt-4.1-mini calls in the last hour", {"model": "gpt-4.1-mini", "since": HOUR_AGO}, "events", None),
    ("o3-mini errors", {"model": "o3-mini", "status": "errors"}, "events", None),
    ("cost of gpt-4o-mini by hour today", {"model": "gpt-4o-mini", "since": TODAY}, "groups", "hour"),
    ("total cost this month", {"since": "2026-11-01T00:00:00Z"}, "totals", None),
    ("which tools were used today", {"since": TODAY}, "groups", "tool"),
    ("which models were called this week", {"since": "2026-11-23T00:00:00Z"}, "groups", "model"),
    ("what hosts did agent alpha call", {"agent": "alpha"}, "groups", "host"),
    ("tools used in session s7", {"session": "s7"}, "groups", "tool"),
    ("which sessions had errors", {"status": "errors"}, "groups", "session"),
    ("refused calls", {"kind": "refused"}, "events", None),
    ("refused calls today by tool", {"kind": "refused", "since": TODAY}, "groups", "tool"),
    (
        "how many calls were denied yesterday",
        {"kind": "refused", "since": YESTERDAY, "until": TODAY},
        "totals",
        None,
    ),
    ("calls to localhost:8080", {"host": "localhost:8080"}, "events", None),
    ("requests to 10.0.0.7", {"host": "10.0.0.7"}, "events", None),
    ("count by host", {}, "groups", "host"),
    ("errors per host today", {"status": "errors", "since": TODAY}, "groups", "host"),
    ("count by status", {}, "groups", "status"),
    ("calls to api.github.com by status", {"host": "api.github.com"}, "groups", "status"),
    ("server errors from api.openai.com", {"status": "5xx", "host": "api.openai.com"}, "events", None),
    (
        "client errors last week",
        {"status": "4xx", "since": "2026-11-16T00:00:00Z", "until": "2026-11-23T00:00:00Z"},
        "events",
        None,
    ),
    ("not found responses", {"status": "404"}, "events", None),
    (
        "rate limited calls to api.anthropic.com",
        {"status": "429", "host": "api.anthropic.com"},
        "events",
        None,
    ),
    ("unauthorized requests today", {"status": "401", "since": TODAY}, "events", None),
    ("500s from agent beta", {"status": "500", "agent": "beta"}, "events", None),
    ("top 5 slowest calls", {"sort": "slowest"}, "events", None),
    (
        "errors from agent alpha yesterday",
        {"agent": "alpha", "status": "errors", "since": YESTERDAY, "until": TODAY},
        "events",
        None,
    ),
    (
        "POST to /v1/messages slower than 3 seconds",
        {"method": "POST", "url": ["/v1/messages"], "min_duration_ms": 3000},
        "events",
        None,
    ),
]


@pytest.mark.parametrize(("question", "expected", "view", "group_by"), QUESTIONS)
def test_each_question_gives_exactly_this_filter(
    question: str, expected: dict[str, Any], view: str, group_by: str | None
) -> None:
    """The question reads to exactly this filter (no field more, none less) and this view."""
    q = ask(question, NOW)
    assert (q.filter.to_json(), q.view, q.group_by) == (expected, view, group_by)


def test_there_are_at_least_forty_questions() -> None:
    """The issue asks for at least 40 realistic questions with their filters."""
    assert len(QUESTIONS) >= 40


def test_top_n_keeps_n() -> None:
    """'top 5 slowest calls' answers five rows at most."""
    assert ask("top 5 slowest calls", NOW).limit == 5


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("slow calls", "'slow'"),
        ("calls to openai", "'openai'"),
        ("which tools were used on mondays", "'mondays'"),
        ("expensive stuff", "'stuff'"),
    ],
)
def test_words_still_not_understood_are_refused_by_name(question: str, words: str) -> None:
    """What is not understood refuses the question in one line naming the words (before: dropped)."""
    with pytest.raises(QuestionError, match=f"^did not understand {words}: "):
        ask(question, NOW)


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("slower than", "needs a duration"),
        ("faster than lightning", "needs a duration"),
        ("slower than 2s faster than 1s", "is not below"),
    ],
)
def test_impossible_durations_are_refused(question: str, reason: str) -> None:
    """A comparison without a duration, or an empty range, is refused saying why."""
    with pytest.raises(QuestionError, match=reason):
        ask(question, NOW)
