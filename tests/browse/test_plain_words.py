"""Plain words read against what the Ledger holds (issue 43): each realistic question and exactly what it
reads as (filter, view, summary, rows), the questions that were wrong or refused before among them; and
words it does not know refused naming them, never turned into a filter.

The Ledger's values come from `KnownValues` here (the reader asks a `Known`; `LedgerValues` answers
the same from a real Ledger in test_ask_answers.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from storage.questions.known import KnownValues
from storage.questions.reading import QuestionError, ask
from storage.questions.times import time_bound

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
TODAY = "2026-11-25T00:00:00Z"
YESTERDAY = "2026-11-24T00:00:00Z"
HOUR_AGO = "2026-11-25T14:42:00Z"
WEEK = "2026-11-23T00:00:00Z"
LAST_WEEK = "2026-11-16T00:00:00Z"
KNOWN = KnownValues(
    {
        "agent": ["alpha", "beta"],
        "model": ["gpt-4o", "claude-sonnet-4-5"],
        "host": ["api.slack.com", "api.openai.com", "api.anthropic.com"],
        "tool": ["LEDGER_COUNTS", "github.get_repo"],
        "session": ["s1", "s2"],
        "task": ["t1"],
        "turn": ["1", "2"],
    }
)

# (question, the filter's wire form exactly, the reading: view, group_by, stat, metric, limit)
Reading = tuple[str, str | None, str | None, str | None, int | None]
EVENTS: Reading = ("events", None, None, None, None)
TOTALS: Reading = ("totals", None, None, None, None)
QUESTIONS: list[tuple[str, dict[str, Any], Reading]] = [
    # wrong before: a function word taken for a value
    ("what did the agent do in the last hour", {"since": HOUR_AGO}, EVENTS),
    ("what did the model do today", {"since": TODAY}, EVENTS),
    ("what has the agent done this week", {"since": WEEK}, EVENTS),
    ("which calls did the tool make yesterday", {"since": YESTERDAY, "until": TODAY}, EVENTS),
    # refused before
    ("average latency by model", {}, ("stats", "model", "avg", "duration", None)),
    (
        "how many tokens did alpha use yesterday",
        {"agent": "alpha", "since": YESTERDAY, "until": TODAY},
        TOTALS,
    ),
    ("how much did we spend yesterday", {"since": YESTERDAY, "until": TODAY}, TOTALS),
    ("show me 5xx errors this week", {"status": "5xx", "since": WEEK}, EVENTS),
    ("last 3 errors", {"status": "errors"}, ("events", None, None, None, 3)),
    ("failed calls to slack", {"status": "errors", "host": "api.slack.com"}, EVENTS),
    # kin: summaries
    ("p95 latency today", {"since": TODAY}, ("stats", None, "p95", "duration", None)),
    ("median response time by host", {}, ("stats", "host", "p50", "duration", None)),
    ("99th percentile duration for gpt-4o", {"model": "gpt-4o"}, ("stats", None, "p99", "duration", None)),
    ("p90 latency per agent this week", {"since": WEEK}, ("stats", "agent", "p90", "duration", None)),
    ("average cost per call by agent", {}, ("stats", "agent", "avg", "cost", None)),
    (
        "max tokens by model yesterday",
        {"since": YESTERDAY, "until": TODAY},
        ("stats", "model", "max", "tokens", None),
    ),
    (
        "latency of calls to api.openai.com",
        {"host": "api.openai.com"},
        ("stats", None, "avg", "duration", None),
    ),
    ("worst latency hourly today", {"since": TODAY}, ("stats", "hour", "max", "duration", None)),
    # kin: spend and tokens
    ("how much did beta spend this week", {"agent": "beta", "since": WEEK}, TOTALS),
    ("total spend last week", {"since": LAST_WEEK, "until": WEEK}, TOTALS),
    ("spend by model today", {"since": TODAY}, ("groups", "model", None, None, None)),
    ("tokens used by alpha in the last 3 hours", {"agent": "alpha", "since": "2026-11-25T12:42:00Z"}, TOTALS),
    # kin: last N, first N
    ("last 5 calls to api.anthropic.com", {"host": "api.anthropic.com"}, ("events", None, None, None, 5)),
    ("first 10 requests today", {"sort": "oldest", "since": TODAY}, ("events", None, None, None, 10)),
    ("last ten refusals", {"kind": "refused"}, ("events", None, None, None, 10)),
    ("last 3 days of errors", {"status": "errors", "since": "2026-11-22T15:42:00Z"}, EVENTS),
    (
        "top 3 most expensive calls today",
        {"sort": "costliest", "since": TODAY},
        ("events", None, None, None, 3),
    ),
    # kin: status classes
    ("2xx responses from api.openai.com", {"status": "2xx", "host": "api.openai.com"}, EVENTS),
    ("4xx errors yesterday", {"status": "4xx", "since": YESTERDAY, "until": TODAY}, EVENTS),
    ("failed 500s from beta", {"status": "500", "agent": "beta"}, EVENTS),
    ("errors by host this week", {"status": "errors", "since": WEEK}, ("groups", "host", None, None, None)),
    ("successful calls by alpha", {"status": "ok", "agent": "alpha"}, EVENTS),
    # kin: relative days and ranges
    ("errors 2 hours ago", {"status": "errors", "since": "2026-11-25T13:42:00Z"}, EVENTS),
    ("calls since yesterday", {"since": YESTERDAY}, EVENTS),
    ("calls before 2026-11-20", {"until": "2026-11-20T00:00:00Z"}, EVENTS),
    ("calls last week by agent", {"since": LAST_WEEK, "until": WEEK}, ("groups", "agent", None, None, None)),
    # kin: names the Ledger holds, bare or after their field
    ("calls to LEDGER_COUNTS today", {"tool": "LEDGER_COUNTS", "since": TODAY}, EVENTS),
    ("errors from agent beta", {"agent": "beta", "status": "errors"}, EVENTS),
    ("what did alpha do in session s1", {"agent": "alpha", "session": "s1"}, EVENTS),
    ("slack calls by status", {"host": "api.slack.com"}, ("groups", "status", None, None, None)),
    ('calls from agent "gamma"', {"agent": "gamma"}, EVENTS),
    ("agent=gamma errors", {"agent": "gamma", "status": "errors"}, EVENTS),
    ("slowest calls today", {"sort": "slowest", "since": TODAY}, EVENTS),
    # kin: weekdays, possessives, bare counts, how long
    ("requests from alpha since monday", {"agent": "alpha", "since": WEEK}, EVENTS),
    ("errors on tuesday", {"status": "errors", "since": YESTERDAY, "until": TODAY}, EVENTS),
    ("average latency of beta's calls", {"agent": "beta"}, ("stats", None, "avg", "duration", None)),
    ("what's the p95 latency", {}, ("stats", None, "p95", "duration", None)),
    ("show the 10 most expensive calls", {"sort": "costliest"}, ("events", None, None, None, 10)),
    (
        "how long did calls to api.openai.com take",
        {"host": "api.openai.com"},
        ("stats", None, "avg", "duration", None),
    ),
    ("anything fail today?", {"status": "errors", "since": TODAY}, EVENTS),
]


@pytest.mark.parametrize(("question", "expected", "reading"), QUESTIONS, ids=[q for q, _, _ in QUESTIONS])
def test_each_question_reads_as_exactly_this(
    question: str, expected: dict[str, Any], reading: Reading
) -> None:
    """The question reads to exactly this filter (no field more, none less) and this answer's shape."""
    q = ask(question, NOW, KNOWN)
    got = (q.view, q.group_by, q.stat, q.metric, q.limit)
    assert (q.filter.to_json(), got) == (expected, reading), q.explain()


def test_there_are_at_least_forty_questions() -> None:
    """The issue asks for at least 40 realistic questions, each with what it reads as."""
    assert len(QUESTIONS) >= 40


def test_the_reading_is_one_line_saying_all_of_it() -> None:
    """`explain()` (what `ask --explain` prints) names the filter, the summary and the rows kept."""
    assert ask("p95 latency by model today", NOW, KNOWN).explain() == (
        f"read as: since={TODAY}, p95 of duration_ms by model"
    )
    assert ask("last 3 errors", NOW, KNOWN).explain() == (
        "read as: status=errors, events listed (a request and its answer are two), at most 3"
    )


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("errors from agent gamma", "'gamma' (no agent of that name in the Ledger"),
        ("model do-it calls", "'do-it' (no model of that name"),
        ("calls in session s9", "'s9' (no session of that name"),
        ("how many tokens did gamma use", "'gamma'"),
        ("failed calls to discord", "'discord'"),
        ("what did the agent frobnicate", "'frobnicate'"),
        ("average latency on mondays", "'mondays'"),
        ("errors in the last fortnight", "'last', 'fortnight'"),
    ],
)
def test_words_it_does_not_know_are_refused_by_name(question: str, named: str) -> None:
    """A word that is no value the Ledger holds (and not quoted) refuses the question naming it."""
    with pytest.raises(QuestionError, match="^did not understand " + named.replace("(", r"\(")):
        ask(question, NOW, KNOWN)


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("calls to api", "'api' names several hosts (api.anthropic.com, api.openai.com, api.slack.com)"),
        ("p95 and average latency", "one summary per question"),
        ("4xx 5xx calls", "one question takes one status"),
    ],
)
def test_questions_with_no_one_reading_are_refused_saying_why(question: str, reason: str) -> None:
    """A word naming several values, two summaries, two statuses: refused, never one picked."""
    with pytest.raises(QuestionError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        ask(question, NOW, KNOWN)


def test_a_word_holding_two_fields_values_asks_which() -> None:
    """A bare word that is both an agent and a session is not guessed at."""
    both = KnownValues({"agent": ["alpha"], "session": ["alpha"]})
    with pytest.raises(QuestionError, match="'agent alpha' or 'session alpha'"):
        ask("errors from alpha", NOW, both)
    assert ask("errors from agent alpha", NOW, both).filter.agent == "alpha"


def test_a_function_word_the_ledger_holds_as_the_fields_value_is_that_value() -> None:
    """'session a' where a session is named "a": the value, not the article; where none is, the
    article (the field stays a plain noun)."""
    named_a = KnownValues({"session": ["a", "b"]})
    assert ask("session a", NOW, named_a).filter.session == "a"
    assert ask("what did the session a do", NOW, named_a).filter.session == "a"
    assert ask("what did the agent do today", NOW, named_a).filter.to_json() == {"since": TODAY}


def test_without_a_ledger_function_words_are_still_never_values() -> None:
    """No `known` (no Ledger at hand): a value after a field is taken as given, but never 'do'."""
    assert ask("what did the agent do today", NOW).filter.to_json() == {"since": TODAY}
    assert ask("errors from agent gamma", NOW).filter.agent == "gamma"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("yesterday", "2026-11-24T00:00:00+00:00"),
        ("today", "2026-11-25T00:00:00+00:00"),
        ("last week", "2026-11-16T00:00:00+00:00"),
        ("this week", "2026-11-23T00:00:00+00:00"),
        ("last 3 days", "2026-11-22T15:42:00+00:00"),
        ("2 hours ago", "2026-11-25T13:42:00+00:00"),
        ("2026-11-01", "2026-11-01T00:00:00+00:00"),
        ("2026-11-01T10:30:00+02:00", "2026-11-01T08:30:00+00:00"),
        ("monday", "2026-11-23T00:00:00+00:00"),
        ("wednesday", "2026-11-25T00:00:00+00:00"),
        ("3pm", "2026-11-25T15:00:00+00:00"),
        ("9:30am", "2026-11-25T09:30:00+00:00"),
        ("14:45", "2026-11-25T14:45:00+00:00"),
    ],
)
def test_since_options_read_the_same_time_words(value: str, expected: str) -> None:
    """`--since`/`--until` read time words as a question does (a range gives its start)."""
    assert time_bound("--since", value, NOW).isoformat() == expected
    assert time_bound("--until", value, NOW).isoformat() == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("calls since last week", {"since": LAST_WEEK}),
        ("calls after last week", {"since": WEEK}),
        ("calls before this week", {"until": WEEK}),
        ("errors since 2 hours ago", {"since": "2026-11-25T13:42:00Z", "status": "errors"}),
        ("calls since yesterday", {"since": YESTERDAY}),
    ],
)
def test_since_and_before_take_time_phrases_in_questions(question: str, expected: dict[str, Any]) -> None:
    """'since last week' in a question means what `--since "last week"` means."""
    assert ask(question, NOW).filter.to_json() == expected


@pytest.mark.parametrize("value", ["fortnight", "yesterday evening", "soon", ""])
def test_a_time_option_that_is_no_time_is_refused(value: str) -> None:
    """A value that is neither ISO 8601 nor time words is one line naming the option."""
    with pytest.raises(QuestionError, match=f"^--since {value!r}: not a time"):
        time_bound("--since", value, NOW)
