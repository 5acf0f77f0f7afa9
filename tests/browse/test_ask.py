"""Plain-words questions: a table of phrases and the filters they give, and phrases that are refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from storage.filters import Filter
from storage.questions.reading import QuestionError, ask

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
DAY = "2026-11-25T00:00:00Z"

PHRASES: list[tuple[str, dict[str, Any], str | None]] = [
    (
        "errors from agent alpha yesterday",
        {"agent": "alpha", "status": "errors", "since": "2026-11-24T00:00:00Z", "until": DAY},
        None,
    ),
    ("cost by model this week", {"since": "2026-11-23T00:00:00Z"}, "model"),
    (
        "calls to api.openai.com in the last hour",
        {"host": "api.openai.com", "since": "2026-11-25T14:42:00Z"},
        None,
    ),
    ("requests in session s1", {"session": "s1"}, None),
    ("POST to /v1/chat/completions", {"method": "POST", "url": ["/v1/chat/completions"]}, None),
    ("tokens per hour today", {"since": DAY}, "hour"),
    (
        "5xx from agent beta last 3 days",
        {"status": "5xx", "agent": "beta", "since": "2026-11-22T15:42:00Z"},
        None,
    ),
    ("how many 404s on api.github.com last week", {"status": "404", "host": "api.github.com"}, None),
    ("agent=alpha status:errors since 2026-11-01", {"agent": "alpha", "status": "errors"}, None),
    ("GET https://API.example.com/v2/items?x=1", {"method": "GET", "host": "api.example.com"}, None),
    ("inbound requests by tool", {"direction": "in"}, "tool"),
    ("outgoing calls grouped by sessions", {"direction": "out"}, "session"),
    ("events of task t9 turn 3 tool search", {"task": "t9", "turn": "3", "tool": "search"}, None),
    ('model "gpt-4o mini" hourly', {"model": "gpt-4o mini"}, "hour"),
    ("kind http.request on 2026-11-20", {"kind": "http.request", "since": "2026-11-20T00:00:00Z"}, None),
    ("delete requests in the past two hours", {"method": "DELETE", "since": "2026-11-25T13:42:00Z"}, None),
    ("successful calls last month", {"status": "ok", "since": "2026-10-01T00:00:00Z"}, None),
    ("url stream localhost:8080", {"url": ["stream"], "host": "localhost:8080"}, None),
]


@pytest.mark.parametrize(("phrase", "expected", "group_by"), PHRASES)
def test_phrases_give_these_filters(phrase: str, expected: dict[str, Any], group_by: str | None) -> None:
    """Each phrase reads to the fields listed (and others only where the row names them)."""
    question = ask(phrase, NOW)
    got = question.filter.to_json()
    for name, value in expected.items():
        assert got.get(name) == value, (phrase, got)
    assert question.group_by == group_by


def test_exact_filters_for_the_issue_examples() -> None:
    """The issue's three examples give exactly these filters, nothing more."""
    assert ask("errors from agent alpha yesterday", NOW).filter == Filter(
        agent="alpha",
        status="errors",
        since=datetime(2026, 11, 24, tzinfo=UTC),
        until=datetime(2026, 11, 25, tzinfo=UTC),
    )
    cost = ask("cost by model this week", NOW)
    assert (cost.filter, cost.group_by) == (Filter(since=datetime(2026, 11, 23, tzinfo=UTC)), "model")
    assert ask("calls to api.openai.com in the last hour", NOW).filter == Filter(
        host="api.openai.com", since=datetime(2026, 11, 25, 14, 42, tzinfo=UTC)
    )
    last_week = ask("last week", NOW).filter
    assert (last_week.since, last_week.until) == (
        datetime(2026, 11, 16, tzinfo=UTC),
        datetime(2026, 11, 23, tzinfo=UTC),
    )


def test_words_not_understood_are_refused_naming_them() -> None:
    """A word it does not understand refuses the question in one line naming the words: the answer
    is never the same filter with those words silently dropped."""
    with pytest.raises(QuestionError) as refused:
        ask("errors from agent alpha with flurbles and wibble", NOW)
    message = str(refused.value)
    assert message.startswith("did not understand 'flurbles', 'wibble': ask with fields")
    assert "\n" not in message


def test_lowercase_get_is_an_everyday_word_not_a_method() -> None:
    """'get me errors' does not filter on GET; 'GET' in capitals does."""
    assert ask("get me errors", NOW).filter.method is None
    assert ask("GET errors", NOW).filter.method == "GET"


@pytest.mark.parametrize(
    ("phrase", "reason"),
    [
        ("", "ask a question"),
        ("   ", "ask a question"),
        ("select * from events where agent = 'alpha'", "never SQL"),
        ("errors; drop table events", "never SQL"),
        ("cost by colour", "cannot count by 'colour'"),
        ("by model by agent", "one counted view per question"),
        ("agent alpha agent beta", "one question takes one agent"),
        ("errors that were 200", "one question takes one status"),
        ("requests in session", "'session' needs a value"),
        ("agent=", "'agent' needs a value"),
        ("last 0 hours", "empty time range"),
        ("last 3 fortnights", "did not understand 'fortnights'"),  # 'last 3' rows of what?
        ("since whenever", "give a date"),
        ("on 2026-13-45", "not a date"),
        ("since 2026-11-25 until 2026-11-20", "is not before"),
        ("errors by", "needs what to count by"),
    ],
)
def test_phrases_that_are_refused(phrase: str, reason: str) -> None:
    """Phrases that cannot mean one filter are refused with a message that says why."""
    with pytest.raises(QuestionError, match=reason):
        ask(phrase, NOW)


def test_reading_is_deterministic() -> None:
    """The same words at the same clock give the same answer every time."""
    phrase = "errors from agent alpha yesterday by model"
    assert len({ask(phrase, NOW).to_json().__repr__() for _ in range(20)}) == 1
