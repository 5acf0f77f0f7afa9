"""The Filter, keyset pages and counted views, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage.event_reads import counts, cursor, select_events, totals
from storage.filters import Filter, QueryError
from storage.ledger import Ledger
from tests.browse.sample import T0, sample_events, sample_ledger

__all__ = ["sample_ledger"]


def ids(ledger: Ledger, flt: Filter, **kw: object) -> list[str]:
    return [e.event_id for e in select_events(ledger.engine, flt, **kw)]  # type: ignore[arg-type]


def test_pages_are_newest_first_and_cover_everything_once(sample_ledger: Ledger) -> None:
    """Keyset pages of 3 walk all ten events newest first, none twice, none skipped."""
    seen: list[str] = []
    before = None
    while True:
        page = select_events(sample_ledger.engine, Filter(), limit=3, before=before)
        if not page:
            break
        seen += [e.event_id for e in page]
        before = cursor(page[-1])
    expected = [e.event_id for e in sorted(sample_events(), key=lambda e: (e.at, e.event_id), reverse=True)]
    assert seen == expected
    assert all(e.at.tzinfo is not None for e in select_events(sample_ledger.engine, Filter(), limit=1))


def test_after_returns_only_newer_events(sample_ledger: Ledger) -> None:
    """`after` gives what arrived since a row, for a live view following new events."""
    oldest = select_events(sample_ledger.engine, Filter(), limit=10)[-3]
    newer = ids(sample_ledger, Filter(), after=cursor(oldest))
    assert newer == [e.event_id for e in select_events(sample_ledger.engine, Filter(), limit=7)]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (Filter(agent="alpha"), {"a1-request", "a1-response", "a2-request", "a2-response"}),
        (Filter(status="errors"), {"a2-response", "a4-response"}),
        (Filter(status="5xx"), {"a4-response"}),
        (Filter(status="404"), {"a2-response"}),
        (Filter(status="ok"), {"a1-response", "a3-response", "a5-response"}),
        (Filter(host="API.OPENAI.COM", kind="http.request"), {"a1-request", "a4-request"}),
        (Filter(method="get"), {"a2-request", "a2-response"}),
        (Filter(url=("CHAT", "completions"), model="gpt-4o", session="s2"), {"a4-request", "a4-response"}),
        (Filter(direction="in", kind="http.request"), {"a5-request"}),
        (Filter(tool="github.get_repo", turn="2", task="t1"), {"a2-request", "a2-response"}),
        (Filter(since=T0 + timedelta(hours=3), until=T0 + timedelta(hours=4)), {"a5-request", "a5-response"}),
        (Filter(until=T0 + timedelta(milliseconds=500)), {"a1-request"}),
        (Filter(url=("100%",)), set()),
    ],
)
def test_each_filter_field_selects_its_events(sample_ledger: Ledger, flt: Filter, expected: set[str]) -> None:
    """Each field narrows to exactly the events it names, the same on both databases."""
    assert set(ids(sample_ledger, flt)) == expected


def test_counts_by_hour_are_a_time_line(sample_ledger: Ledger) -> None:
    """Hours come oldest first with events, tokens and cost summed from rows."""
    groups = counts(sample_ledger.engine, Filter(), "hour")
    assert [(g.key, g.events) for g in groups] == [
        ("2026-11-29T10:00Z", 4),
        ("2026-11-29T11:00Z", 2),
        ("2026-11-29T12:00Z", 2),
        ("2026-11-29T13:00Z", 2),
    ]
    assert groups[0].tokens_in == 100 and groups[1].tokens_out == 50


def test_counts_by_model_sum_tokens_and_cost(sample_ledger: Ledger) -> None:
    """By model: largest first, events without a model under None, sums exact."""
    groups = {g.key: g for g in counts(sample_ledger.engine, Filter(), "model")}
    assert groups["gpt-4o"].events == 4
    assert (groups["gpt-4o"].tokens_in, groups["gpt-4o"].tokens_out) == (100, 20)
    assert groups["gpt-4o"].cost_usd == pytest.approx(0.0015)
    assert groups["claude-sonnet"].cost_usd == pytest.approx(0.0042)
    assert groups[None].events == 4
    first = counts(sample_ledger.engine, Filter(status="errors"), "agent")
    assert [(g.key, g.events) for g in first] == [("alpha", 1), ("beta", 1)]


def test_totals_count_distinct_tools_models_sessions(sample_ledger: Ledger) -> None:
    """The counts route's summary: events, tokens, cost and distinct values, over a filter."""
    summary = totals(sample_ledger.engine, Filter())
    assert summary["events"] == 10
    assert (summary["distinct_tools"], summary["distinct_models"], summary["distinct_sessions"]) == (2, 2, 2)
    assert summary["cost_usd"] == pytest.approx(0.0057)
    assert summary["first"] == "2026-11-29T10:05:00Z"


def test_unknown_grouping_and_bad_values_are_refused() -> None:
    """Bad input is a QueryError naming the problem, never a silent match-everything."""
    with pytest.raises(QueryError, match="cannot count by 'colour'"):
        counts(None, Filter(), "colour")  # type: ignore[arg-type]
    with pytest.raises(QueryError, match="status"):
        Filter(status="teapot")
    with pytest.raises(QueryError, match="direction"):
        Filter(direction="sideways")
    with pytest.raises(QueryError, match="not before"):
        Filter(since=T0, until=T0)
    with pytest.raises(QueryError, match="unknown filter field 'colour'"):
        Filter.from_json({"colour": "red"})


def test_filter_json_round_trips() -> None:
    """The wire form reads back to the same filter; naive times are UTC."""
    flt = Filter(agent="alpha", status="errors", since=T0, url=("v1", "chat"))
    wire = flt.to_json()
    assert wire == {
        "agent": "alpha",
        "status": "errors",
        "since": "2026-11-29T10:05:00Z",
        "url": ["v1", "chat"],
    }
    assert Filter.from_json(wire) == flt
    assert Filter.from_json({"since": "2026-11-29T10:05:00", "status": 404}).status == "404"
    assert Filter().describe() == "every event"
