"""Summaries of a figure over the events a filter matches: count, average and percentiles, optionally
per key ("average latency by model", "p95 duration today", "average cost per call by agent").

The figure is how long an answer took (`duration`, ms, the same measure `slowest` sorts by), what an
event cost (`cost`, USD) or its tokens in + out (`tokens`). Percentiles are computed here from the
figures the database returns (nearest rank), so SQLite and PostgreSQL answer alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, Final

from sqlalchemy import ColumnElement, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.filters import GROUP_BYS, Filter, QueryError
from storage.queries import EVENTS, group_key, hour_key, timed, where

METRICS: Final = ("duration", "cost", "tokens")
UNITS: Final = {"duration": "ms", "cost": "USD", "tokens": "tokens"}
PERCENTILES: Final = (50, 90, 95, 99)


@dataclass(frozen=True, slots=True)
class Summary:
    """One row: a key (None without `by`) and its figures' count, average, percentiles, extremes."""

    key: str | None
    count: int
    avg: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "count": self.count}
        for name in ("avg", "p50", "p90", "p95", "p99", "min", "max"):
            value = getattr(self, name)
            out[name] = None if value is None else round(value, 9)
        return out


def percentile(ordered: list[float], p: int) -> float:
    """Nearest rank: the smallest figure with at least p% of the figures at or below it."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(key: str | None, figures: list[float]) -> Summary:
    if not figures:
        return Summary(key, 0, None, None, None, None, None, None, None)
    ordered = sorted(figures)
    p50, p90, p95, p99 = (percentile(ordered, p) for p in PERCENTILES)
    return Summary(
        key, len(ordered), sum(ordered) / len(ordered), p50, p90, p95, p99, ordered[0], ordered[-1]
    )


def figure(flt: Filter, metric: str, engine: Engine) -> tuple[Any, ColumnElement[Any], ColumnElement[bool]]:
    """The FROM clause, the figure's expression and the WHERE clause for one metric."""
    t = EVENTS
    if metric == "duration":
        source, took = timed(engine, t, replace(flt, sort=flt.sort or "slowest"))
        assert took is not None
        return source, took, where(t, flt, took)
    source, took = timed(engine, t, flt)
    value = t.c.cost_usd if metric == "cost" else t.c.tokens_in + t.c.tokens_out
    return source, value, where(t, flt, took) & value.is_not(None)


def stats(engine: Engine, flt: Filter, metric: str, by: str | None = None) -> list[Summary]:
    """The metric summarized over the filter's events, one row per `by` key (largest count first;
    hours oldest first), or one row."""
    if metric not in METRICS:
        raise QueryError(f"a summary is of {', '.join(METRICS)}, not {metric!r}")
    if by is not None and by not in GROUP_BYS:
        raise QueryError(f"cannot summarize by {by!r}; by one of: {', '.join(GROUP_BYS)}")
    t = EVENTS
    source, value, cond = figure(flt, metric, engine)
    key = group_key(engine, t, by) if by else None
    columns = [value.label("v")] if key is None else [key.label("k"), value.label("v")]
    stmt = select(*columns).select_from(source).where(cond)
    grouped: dict[str | None, list[float]] = defaultdict(list)
    try:
        with engine.connect() as conn:
            for row in conn.execute(stmt):
                if row.v is None:
                    continue
                k = None if key is None else (hour_key(row.k) if by == "hour" else _text(row.k))
                grouped[k].append(float(row.v))
    except SQLAlchemyError as e:
        raise QueryError(f"cannot summarize events: {e}".splitlines()[0]) from e
    if by is None:
        return [summarize(None, grouped.get(None, []))]
    rows = [summarize(k, v) for k, v in grouped.items()]
    if by == "hour":
        return sorted(rows, key=lambda s: s.key or "")
    return sorted(rows, key=lambda s: (-s.count, s.key is None, s.key or ""))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
