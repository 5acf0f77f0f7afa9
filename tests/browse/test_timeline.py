"""Traffic over time per group, summed by the database (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from storage.filters import Filter, QueryError
from storage.ledger import Ledger
from storage.timeline import timeline
from tests.browse.sample import sample_ledger

__all__ = ["sample_ledger"]


def test_each_group_has_events_tokens_and_cost_per_hour(sample_ledger: Ledger) -> None:
    """Every group's series spans the same hours (empty hours are zeros) and sums to its counts."""
    line = timeline(sample_ledger.engine, Filter(), "model")
    assert line.hours == ("2026-11-29T10:00Z", "2026-11-29T11:00Z", "2026-11-29T12:00Z", "2026-11-29T13:00Z")
    gpt = line.groups["gpt-4o"]
    assert gpt.events == (2.0, 0.0, 2.0, 0.0)
    assert gpt.tokens == (120.0, 0.0, 0.0, 0.0)
    assert gpt.cost == pytest.approx((0.0015, 0.0, 0.0, 0.0))
    assert line.groups[None].events == (2.0, 0.0, 0.0, 2.0)
    assert timeline(sample_ledger.engine, Filter(agent="nobody"), "tool").hours == ()


def test_refuses_what_is_not_a_group(sample_ledger: Ledger) -> None:
    """Hours are the axis, not a group; an unknown field is refused by name."""
    for by in ("hour", "colour"):
        with pytest.raises(QueryError, match="cannot draw over time"):
            timeline(sample_ledger.engine, Filter(), by)
