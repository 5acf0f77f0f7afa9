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
from typing import TYPE_CHECKING, Any, Final

from storage import event_sql as sql
from storage.event_reads import hour_key
from storage.filters import GROUP_BYS, Filter, QueryError
from storage.reader import Reader, reading

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

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


def figure(dialect: sql.Dialect, flt: Filter, metric: str, params: list[Any]) -> tuple[str, str, str]:
    """The FROM clause, the figure's expression and the WHERE clause for one metric."""
    if metric == "duration":
        source, took = sql.timed(dialect, replace(flt, sort=flt.sort or "slowest"))
        assert took is not None
        return source, took, sql.where(dialect, flt, params, took)
    source, took = sql.timed(dialect, flt)
    value = "events.cost_usd" if metric == "cost" else "(events.tokens_in + events.tokens_out)"
    return source, value, f"{sql.where(dialect, flt, params, took)} AND {value} IS NOT NULL"


def stats(source: Engine | Reader, flt: Filter, metric: str, by: str | None = None) -> list[Summary]:
    """The metric summarized over the filter's events, one row per `by` key (largest count first;
    hours oldest first), or one row."""
    if metric not in METRICS:
        raise QueryError(f"a summary is of {', '.join(METRICS)}, not {metric!r}")
    if by is not None and by not in GROUP_BYS:
        raise QueryError(f"cannot summarize by {by!r}; by one of: {', '.join(GROUP_BYS)}")
    grouped: dict[str | None, list[float]] = defaultdict(list)
    with reading(source) as r:
        params: list[Any] = []
        frm, value, cond = figure(r.dialect, flt, metric, params)
        key = f"{sql.group_key(r.dialect, by)} AS k, " if by else ""
        rows = r.rows(f"SELECT {key}{value} AS v FROM {frm} WHERE {cond}", params, "summarize events")
    for row in rows:
        if row["v"] is None:
            continue
        k = None if by is None else (hour_key(row["k"]) if by == "hour" else _text(row["k"]))
        grouped[k].append(float(row["v"]))
    if by is None:
        return [summarize(None, grouped.get(None, []))]
    summaries = [summarize(k, v) for k, v in grouped.items()]
    if by == "hour":
        return sorted(summaries, key=lambda s: s.key or "")
    return sorted(summaries, key=lambda s: (-s.count, s.key is None, s.key or ""))


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
