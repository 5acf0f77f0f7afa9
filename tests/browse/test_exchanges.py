"""Exchanges grouped by the database, on SQLite and PostgreSQL, and how their figures are written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from storage.events import Batch
from storage.exchanges import select_exchanges, timing
from storage.filters import Filter
from storage.ledger import Ledger, open_ledger
from tests.browse.sample import sample_ledger
from tests.support.question_table import TODAY, recorded_events
from tui import figures
from tui.exchange_cells import DROP_ORDER, cells, layout

__all__ = ["sample_ledger"]


def actions(ledger: Ledger, flt: Filter, **kw: object) -> list[str]:
    return [x.action_id for x in select_exchanges(ledger.engine, flt, **kw)]  # type: ignore[arg-type]


def test_one_row_per_exchange_with_its_answers_figures(sample_ledger: Ledger) -> None:
    """Each action is one exchange, newest first, carrying its answer's status, size, model, tokens, cost
    and the duration from request to answer."""
    rows = select_exchanges(sample_ledger.engine, Filter(), limit=10)
    assert [x.action_id for x in rows] == ["a5", "a4", "a3", "a2", "a1"]
    a1 = rows[-1]
    assert (a1.status, a1.model, a1.tokens_in, a1.tokens_out, a1.cost_usd) == (200, "gpt-4o", 100, 20, 0.0015)
    assert a1.answer_size == 111 and a1.events == 2 and a1.inner == 0
    assert a1.timing.duration_ms == 850.0 and a1.timing.ttfb_ms is None
    a4 = rows[1]
    assert (a4.status, a4.error) == (502, "upstream reset")


def test_filters_on_answer_fields_and_pages(sample_ledger: Ledger) -> None:
    """Status and model live on the answer, the rest on every event: both filter exchanges; keyset pages
    of two walk every exchange once."""
    assert actions(sample_ledger, Filter(status="errors")) == ["a4", "a2"]
    assert actions(sample_ledger, Filter(model="gpt-4o")) == ["a4", "a1"]
    assert actions(sample_ledger, Filter(agent="alpha", status="4xx")) == ["a2"]
    assert actions(sample_ledger, Filter(direction="in", host="hooks.example.com")) == ["a5"]
    seen, before = [], None
    while page := select_exchanges(sample_ledger.engine, Filter(), limit=2, before=before):
        seen += [x.action_id for x in page]
        before = (page[-1].opening.at, page[-1].opening.event_id)
    assert seen == ["a5", "a4", "a3", "a2", "a1"]
    newest = select_exchanges(sample_ledger.engine, Filter(), limit=5)[2]
    assert actions(sample_ledger, Filter(), after=(newest.opening.at, newest.opening.event_id)) == [
        "a5",
        "a4",
    ]


def test_timing_is_one_function() -> None:
    """Duration is the answer's time minus the request's; no answer, no duration."""
    t = datetime(2026, 1, 1, tzinfo=UTC)
    assert timing(t, t + timedelta(milliseconds=1250)).duration_ms == 1250.0
    assert timing(t, None).duration_ms is None


def test_small_costs_keep_their_significant_digits() -> None:
    """A cost under $0.00005 is never $0.0000: two significant digits at least, four decimals at least."""
    assert figures.cost(0.000042) == "$0.000042"
    assert figures.cost(0.0000357) == "$0.000036"
    assert figures.cost(0.00004999) == "$0.000050"
    assert figures.cost(0.0015) == "$0.0015"
    assert figures.cost(12.345) == "$12.35"
    assert figures.cost(0) == "$0" and figures.cost(None) == ""
    assert "$0.0000" not in {figures.cost(v / 1e7) for v in range(1, 500)}


def test_sizes_durations_and_sparks() -> None:
    """Figures read short: sizes in binary units, durations in ms or s, a sparkline squeezed to width."""
    assert [figures.size(v) for v in (12, 1536, 5 * 1024 * 1024)] == ["12 B", "1.5 KiB", "5.0 MiB"]
    assert [figures.duration(v) for v in (850, 1250, 42_000, 125_000)] == ["850ms", "1.25s", "42.0s", "2m05s"]
    assert figures.spark([0, 1, 2, 4], 4) == " ▂▄█"
    assert len(figures.spark(list(range(100)), 12)) == 12


def test_columns_fit_the_width_and_drop_the_least_useful_first(sample_ledger: Ledger) -> None:
    """At 120 columns every figure is shown at its content's width (the model whole); narrower terminals
    drop columns in DROP_ORDER, and the line always fits."""
    rows = [cells(x) for x in select_exchanges(sample_ledger.engine, Filter())]
    wide = dict((c.key, w) for c, w in layout(rows, 120))
    assert {"time", "who", "status", "target", "duration", "model", "tokens", "cost"} <= set(wide)
    assert "ttfb" not in wide  # empty on every row: not recorded yet
    assert wide["model"] >= len("claude-sonnet") and wide["cost"] >= len("$0.0042")
    for width in (120, 100, 80, 60):
        shown = layout(rows, width)
        assert sum(w + 2 for _, w in shown) <= width - 2
        dropped = [k for k in DROP_ORDER if k not in {c.key for c, _ in shown} and k != "ttfb"]
        assert dropped == [k for k in DROP_ORDER if k != "ttfb"][: len(dropped)]
    narrow = {c.key for c, _ in layout(rows, 80)}
    assert {"status", "target", "cost", "model", "tokens"} <= narrow


def test_a_sorted_filter_lists_exchanges_in_that_order(ledger_url: str, tmp_path: Path) -> None:
    """'slowest calls today' in the browser's exchange list (issue 51): slowest first, not newest
    first; costliest and oldest likewise; a top N, so no next page and nothing newer follows."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    try:
        ledger.append(Batch("t", 1, recorded_events()))
        today = Filter(since=TODAY)
        assert actions(ledger, today.merged(sort="slowest"), limit=5) == ["x9", "x4", "x17", "x6", "x1"]
        assert actions(ledger, today.merged(sort="fastest"), limit=3) == ["x5", "x3", "x8"]
        assert actions(ledger, today.merged(sort="costliest"), limit=3) == ["x9", "x17", "x6"]
        assert actions(ledger, today.merged(sort="oldest"), limit=3) == ["x1", "x2", "x3"]
        top = select_exchanges(ledger.engine, today.merged(sort="slowest"), limit=2)
        cursor = (top[-1].opening.at, top[-1].opening.event_id)
        assert actions(ledger, today.merged(sort="slowest"), before=cursor) == []
        assert actions(ledger, today.merged(sort="slowest"), after=cursor) == []
    finally:
        ledger.close()
