"""Questions to the Ledger as projections: one `Filter`, newest-first pages, and counted views.

Every screen, route and command asks the Ledger through the same frozen `Filter`, so a question typed
in plain words (`storage.ask`), a filter POSTed as JSON and the TUI's filter bar all mean the same rows.
Reads are SQLAlchemy Core over the `events` table and run unchanged on SQLite and PostgreSQL; only the
hour bucket differs per dialect. Pages use a keyset cursor `(at, event_id)` so the millionth row costs
what the first one does (an OFFSET would scan everything before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Table,
    and_,
    case,
    func,
    literal_column,
    null,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.events import StoredEvent
from storage.filters import (
    GROUP_BYS,
    SORTS,
    STATUS_CLASSES,
    Cursor,
    Filter,
    Group,
    GroupBy,
    QueryError,
    iso,
    parse_time,
)
from storage.kinds import (
    DISPATCH_REFUSED,
    DISPATCH_REPLY,
    DISPATCH_UPSTREAM_RESPONSE,
    HTTP_RESPONSE,
    REFUSED,
    REFUSED_KINDS,
)
from storage.rows import from_mapping
from storage.schema import EventRow

__all__ = [
    "GROUP_BYS", "SORTS", "STATUS_CLASSES", "Cursor", "Filter", "Group", "GroupBy", "QueryError",
    "counts", "cursor", "event_json", "groups_json", "parse_time", "select_events", "totals",
]  # fmt: skip

EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]
ANSWER_KINDS: Final = (HTTP_RESPONSE, DISPATCH_UPSTREAM_RESPONSE, DISPATCH_REPLY, DISPATCH_REFUSED)
"""The kinds that answer a request: a filter on durations matches these (each took its action's time)."""


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


def timed(engine: Engine, t: Table, flt: Filter) -> tuple[Any, ColumnElement[Any] | None]:
    """The FROM clause and the duration expression a filter needs (no join when it reads no durations).

    A duration is how long an answer took: its last byte's offset from its request (`last_byte_ms`,
    what capture measures on the wire) where one was recorded; else, for older recordings and kinds
    without timing, its `at` minus the earliest `at` of its action (the request that began it).
    """
    if not flt.timed:
        return t, None
    started = select(t.c.action_id, func.min(t.c.at).label("started")).group_by(t.c.action_id).subquery("s")
    took = func.coalesce(t.c.last_byte_ms, duration_ms(engine, t.c.at, started.c.started))
    return t.join(started, started.c.action_id == t.c.action_id), took


def duration_ms(engine: Engine, end: ColumnElement[Any], start: ColumnElement[Any]) -> ColumnElement[Any]:
    """Milliseconds from `start` to `end`, in each dialect's own arithmetic."""
    if engine.dialect.name == "postgresql":
        return func.extract("epoch", end - start) * 1000
    return (func.julianday(end) - func.julianday(start)) * 86_400_000.0


def _order(t: Table, flt: Filter, took: ColumnElement[Any] | None) -> list[Any]:
    sort = flt.sort or "newest"
    if sort == "oldest":
        return [t.c.at.asc(), t.c.event_id.asc()]
    if sort in ("slowest", "fastest") and took is not None:
        return [took.desc() if sort == "slowest" else took.asc(), t.c.at.desc(), t.c.event_id.desc()]
    if sort == "costliest":
        return [func.coalesce(t.c.cost_usd, -1).desc(), t.c.at.desc(), t.c.event_id.desc()]
    if sort == "largest":
        return [func.coalesce(t.c.payload_size, -1).desc(), t.c.at.desc(), t.c.event_id.desc()]
    return [t.c.at.desc(), t.c.event_id.desc()]


def select_events(
    engine: Engine,
    flt: Filter,
    *,
    limit: int = 100,
    before: Cursor | None = None,
    after: Cursor | None = None,
) -> list[StoredEvent]:
    """Up to `limit` matching events, newest first, strictly older than `before` / newer than `after`.

    Pass the last row's `cursor(event)` as `before` for the next page; pass the newest row's as
    `after` to fetch what arrived since (a live view following new events). The cursor is compared
    as a row value, `(at, event_id) < (?, ?)`, which both databases read as one range of the
    `(at, event_id)` index (an OR of the two parts would not be).
    """
    t = EVENTS
    source, took = timed(engine, t, flt)
    stmt = select(t).select_from(source).where(where(t, flt, took))
    if (before is not None or after is not None) and (flt.sort or "newest") != "newest":
        raise QueryError(f"sort {flt.sort} is a top N: it has no next page (narrow the filter instead)")
    if before is not None:
        at, event_id = before
        at = _bind_time(t, at)
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) < tuple_(at, event_id))
    if after is not None:
        at, event_id = after
        at = _bind_time(t, at)
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) > tuple_(at, event_id))
    stmt = stmt.order_by(*_order(t, flt, took)).limit(max(0, limit))
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read events: {e}".splitlines()[0]) from e
    return [from_mapping(r) for r in rows]


def cursor(event: StoredEvent) -> Cursor:
    """The keyset position of an event in newest-first order."""
    return (event.at, event.event_id)


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


def hour_key(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:00Z")
    text = str(value)
    return f"{text[:10]}T{text[11:13]}:00Z"


def unpriced(t: Any) -> Any:
    """How many of the rows are model calls with tokens and no cost (no price known for the model):
    shown beside a summed cost so an unknown model is never read as $0."""
    priceless = and_(
        t.c.model.is_not(None),
        or_(t.c.tokens_in.is_not(None), t.c.tokens_out.is_not(None)),
        t.c.cost_usd.is_(None),
    )
    return func.coalesce(func.sum(case((priceless, 1), else_=0)), 0)


def counts(engine: Engine, flt: Filter, by: str) -> list[Group]:
    """Events, tokens and cost summed per hour, session, turn, kind, agent, model, tool or task.

    Hours come oldest first (a time line); every other view comes largest first, then by key.
    """
    if by not in GROUP_BYS:
        raise QueryError(f"cannot count by {by!r}; by one of: {', '.join(GROUP_BYS)}")
    t = EVENTS
    source, took = timed(engine, t, flt)
    key = group_key(engine, t, by)
    label = key.label("key")
    stmt = (
        select(
            label,
            func.count().label("events"),
            func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
            func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
            func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
            unpriced(t).label("unpriced"),
        )
        .select_from(source)
        .where(where(t, flt, took))
        .group_by(key)
    )
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot count events: {e}".splitlines()[0]) from e
    groups = [
        Group(
            key=hour_key(r.key) if by == "hour" else (None if r.key is None else str(r.key)),
            events=int(r.events),
            tokens_in=int(r.tokens_in),
            tokens_out=int(r.tokens_out),
            cost_usd=float(r.cost_usd),
            unpriced=int(r.unpriced),
        )
        for r in rows
    ]
    if by == "hour":
        return sorted(groups, key=lambda g: g.key or "")
    return sorted(groups, key=lambda g: (-g.events, g.key is None, g.key or ""))


def totals(engine: Engine, flt: Filter) -> dict[str, Any]:
    """Everything the filter matches, summed: events, tokens, cost, distinct tools/models/sessions."""
    t = EVENTS
    source, took = timed(engine, t, flt)
    stmt = (
        select(
            func.count().label("events"),
            func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
            func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
            func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
            unpriced(t).label("unpriced"),
            func.count(t.c.tool.distinct()).label("tools"),
            func.count(t.c.model.distinct()).label("models"),
            func.count(t.c.session.distinct()).label("sessions"),
            func.min(t.c.at).label("first"),
            func.max(t.c.at).label("last"),
        )
        .select_from(source)
        .where(where(t, flt, took))
    )
    try:
        with engine.connect() as conn:
            r = conn.execute(stmt).one()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot count events: {e}".splitlines()[0]) from e
    return {
        "events": int(r.events),
        "tokens_in": int(r.tokens_in),
        "tokens_out": int(r.tokens_out),
        "cost_usd": round(float(r.cost_usd), 9),
        "unpriced": int(r.unpriced),
        "distinct_tools": int(r.tools),
        "distinct_models": int(r.models),
        "distinct_sessions": int(r.sessions),
        "first": iso(utc(r.first)) if r.first is not None else None,
        "last": iso(utc(r.last)) if r.last is not None else None,
    }


# --- rows to values ----------------------------------------------------------------------------------


def utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def event_json(event: StoredEvent) -> dict[str, Any]:
    """An event as JSON, the Ledger's own stable form (`StoredEvent.to_json`)."""
    return event.to_json()


def groups_json(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [g.to_json() for g in groups]
