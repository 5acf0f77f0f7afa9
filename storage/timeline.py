"""Traffic over time per group: events, tokens and cost summed per (group, hour) by the database.

The counts screen draws one sparkline per model, tool or session, so a spike is seen before it is
read. One GROUP BY over the filter's events gives every cell; hours without events are zeros, filled
in here, so each series' x axis is the same stretch of time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.event_reads import hour_key
from storage.filters import GROUP_BYS, Filter, QueryError
from storage.queries import EVENTS, bucket, group_key, where

MAX_HOURS: Final = 24 * 14
"""At most the last two weeks of hours that have events."""


@dataclass(frozen=True, slots=True)
class Series:
    """One group's figures hour by hour, oldest first, aligned with `Timeline.hours`."""

    events: tuple[float, ...]
    tokens: tuple[float, ...]
    cost: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Hours from the first to the last with events, and each group's series over them."""

    hours: tuple[str, ...] = ()
    groups: dict[str | None, Series] = field(default_factory=dict)


def _hours(first: str, last: str) -> list[str]:
    start = datetime.strptime(first, "%Y-%m-%dT%H:00Z")
    end = datetime.strptime(last, "%Y-%m-%dT%H:00Z")
    start = max(start, end - timedelta(hours=MAX_HOURS - 1))
    out = []
    while start <= end:
        out.append(start.strftime("%Y-%m-%dT%H:00Z"))
        start += timedelta(hours=1)
    return out


def timeline(engine: Engine, flt: Filter, by: str) -> Timeline:
    """Events, tokens (in + out) and cost per hour for each value of `by` under `flt`."""
    if by not in GROUP_BYS or by == "hour":
        raise QueryError(f"cannot draw over time by {by!r}; by one of: {', '.join(GROUP_BYS[1:])}")
    t = EVENTS
    hour = bucket(engine, t)
    grouped = group_key(engine, t, by)
    stmt = (
        select(
            grouped.label("key"),
            hour.label("hour"),
            func.count().label("events"),
            func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
            func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
            func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
        )
        .where(where(t, flt))
        .group_by(grouped, hour)
    )
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot count events over time: {e}".splitlines()[0]) from e
    cells = [(None if r.key is None else str(r.key), hour_key(r.hour), r) for r in rows]
    known = [h for _, h, _ in cells if h]
    if not known:
        return Timeline()
    hours = _hours(min(known), max(known))
    index = {h: i for i, h in enumerate(hours)}
    figures: dict[str | None, list[list[float]]] = {}
    for key, h, r in cells:
        if h not in index:
            continue
        series = figures.setdefault(key, [[0.0] * len(hours) for _ in range(3)])
        i = index[h]
        series[0][i] += int(r.events)
        series[1][i] += int(r.tokens_in) + int(r.tokens_out)
        series[2][i] += float(r.cost_usd)
    return Timeline(
        tuple(hours), {k: Series(tuple(e), tuple(tk), tuple(c)) for k, (e, tk, c) in figures.items()}
    )
