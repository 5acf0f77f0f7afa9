"""Questions to the Ledger: the `Filter`'s answers, and its conditions as SQLAlchemy Core for the
queries still written in it.

Every screen, route and command asks the Ledger through the same frozen `Filter`, so a question typed
in plain words (`storage.ask`), a filter POSTed as JSON and the TUI's filter bar all mean the same rows.
Pages, counted views and totals are `storage.event_reads`' (SQL text any DB-API connection runs, so a
read command needs no SQLAlchemy), named here too for the screens and routes that import them from
here. The expressions below serve the exchanges' list and the time line (`storage.exchanges`,
`storage.timeline`) and the usage sums (`storage.usage_totals`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import ColumnElement, Table, and_, case, func, literal_column, null, or_, true
from sqlalchemy.engine import Engine

from storage.event_reads import counts, cursor, event_json, groups_json, hour_key, select_events, totals, utc
from storage.event_sql import ANSWER_KINDS
from storage.filters import (
    GROUP_BYS,
    SORTS,
    STATUS_CLASSES,
    Cursor,
    Filter,
    Group,
    GroupBy,
    QueryError,
    parse_time,
)
from storage.kinds import REFUSED, REFUSED_KINDS
from storage.schema import EventRow

__all__ = [
    "ANSWER_KINDS", "GROUP_BYS", "SORTS", "STATUS_CLASSES", "Cursor", "Filter", "Group", "GroupBy",
    "QueryError", "counts", "cursor", "event_json", "groups_json", "hour_key", "parse_time",
    "select_events", "totals", "utc",
]  # fmt: skip

EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]


def _conditions(t: Table, flt: Filter) -> list[ColumnElement[bool]]:
    c = t.c
    out: list[ColumnElement[bool]] = []
    for name in ("kind", "direction", "tool", "session", "task", "turn", "agent", "model"):
        value = getattr(flt, name)
        if value is not None:
            out.append(c.kind.in_(REFUSED_KINDS) if name == "kind" and value == REFUSED else c[name] == value)
    if flt.host is not None:
        out.append(func.lower(c.host) == flt.host.lower())
    if flt.method is not None:
        out.append(c.method == flt.method.upper())
    if flt.since is not None:
        out.append(c.at >= _bind_time(t, flt.since))
    if flt.until is not None:
        out.append(c.at < _bind_time(t, flt.until))
    for word in flt.url:
        out.append(c.url.icontains(word, autoescape=True))
    if flt.status is not None:
        out.append(_status_condition(t, flt.status))
    return out


def _status_condition(t: Table, status: str) -> ColumnElement[bool]:
    c = t.c
    # HTTP statuses are below 1000; a WebSocket close code (1000 and up) is judged by its `error`.
    if status == "errors":
        return or_(and_(c.status >= 400, c.status < 1000), c.error.is_not(None))
    if status == "ok":
        return and_(or_(c.status < 400, c.status >= 1000), c.error.is_(None))
    if status.endswith("xx"):
        low = int(status[0]) * 100
        return and_(c.status >= low, c.status < low + 100)
    return c.status == int(status)


def _bind_time(t: Table, when: datetime) -> datetime:
    """UTC, naive where the column keeps naive UTC (SQLite, or a PostgreSQL timestamp without zone)."""
    when = when.astimezone(UTC)
    return when if getattr(t.c.at.type, "timezone", False) else when.replace(tzinfo=None)


def where(t: Table, flt: Filter, took: ColumnElement[Any] | None = None) -> ColumnElement[bool]:
    conds = _conditions(t, flt)
    if took is not None:
        conds.append(t.c.kind.in_(ANSWER_KINDS))
        if flt.min_duration_ms is not None:
            conds.append(took >= flt.min_duration_ms)
        if flt.max_duration_ms is not None:
            conds.append(took < flt.max_duration_ms)
    return and_(*conds) if conds else true()


def bucket(engine: Engine, t: Table) -> ColumnElement[Any]:
    """The hour an event falls in, as a value the database groups cheaply (formatted in Python)."""
    # Literals, not bound parameters, so the expression can match an index built on it.
    if engine.dialect.name == "postgresql":
        at: ColumnElement[Any] = t.c.at
        if getattr(t.c.at.type, "timezone", False):
            at = t.c.at.op("AT TIME ZONE")(literal_column("'UTC'"))
        return func.date_trunc(literal_column("'hour'"), at)
    # SQLite keeps SQLAlchemy datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' text: the hour is a prefix.
    return func.substr(t.c.at, literal_column("1"), literal_column("13"))


def rule_of(engine: Engine, t: Table) -> ColumnElement[Any]:
    """The rule (or limit) a refusal names: its `error` up to the first colon (`RULE: why`, as the
    door and the egress policy write it); NULL for any other event."""
    if engine.dialect.name == "postgresql":
        prefix: ColumnElement[Any] = func.split_part(t.c.error, literal_column("':'"), 1)
    else:
        prefix = func.substr(t.c.error, 1, func.instr(t.c.error, literal_column("':'")) - 1)
    return case((t.c.kind.in_(REFUSED_KINDS), prefix), else_=null())


def group_key(engine: Engine, t: Table, by: str) -> ColumnElement[Any]:
    """What a count by `by` groups on: a column, the hour bucket, or a refusal's rule."""
    if by == "hour":
        return bucket(engine, t)
    if by == "rule":
        return rule_of(engine, t)
    return t.c[by]
