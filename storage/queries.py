"""Questions to the Ledger as projections: one `Filter`, newest-first pages, and counted views.

Every screen, route and command asks the Ledger through the same frozen `Filter`, so a question typed
in plain words (`storage.ask`), a filter POSTed as JSON and the TUI's filter bar all mean the same rows.
Reads are SQLAlchemy Core over the `events` table and run unchanged on SQLite and PostgreSQL; only the
hour bucket differs per dialect. Pages use a keyset cursor `(at, event_id)` so the millionth row costs
what the first one does (an OFFSET would scan everything before it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal

from sqlalchemy import (
    ColumnElement,
    Table,
    and_,
    func,
    literal_column,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.errors import StorageError
from storage.events import StoredEvent
from storage.rows import from_mapping
from storage.schema import EventRow

GroupBy = Literal["hour", "session", "turn", "kind", "agent", "model", "tool", "task"]
GROUP_BYS: Final[tuple[str, ...]] = ("hour", "session", "turn", "kind", "agent", "model", "tool", "task")
STATUS_CLASSES: Final[tuple[str, ...]] = ("errors", "ok", "1xx", "2xx", "3xx", "4xx", "5xx")
"""`errors` is an HTTP status >= 400 or a recorded error; `ok` is the rest that has a status."""

_STATUS = re.compile(r"^(?:[1-5]xx|[1-5]\d\d|errors|ok)$")
Cursor = tuple[datetime, str]


class QueryError(StorageError):
    """A filter or a counted view that cannot be asked (unknown field, bad value)."""


@dataclass(frozen=True, slots=True)
class Filter:
    """Which events a question is about; every field left `None` (or empty) matches everything.

    `status` is a code ("404"), a class ("4xx") or a name ("errors": status >= 400 or an error was
    recorded; "ok": a status below 400 and no error). `url` words must all appear in the URL
    (case-insensitive). `since` is inclusive and `until` exclusive, both UTC.
    """

    kind: str | None = None
    direction: str | None = None
    tool: str | None = None
    session: str | None = None
    task: str | None = None
    turn: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str | None = None
    host: str | None = None
    method: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    url: tuple[str, ...] = ()
    slower_than_ms: float | None = None
    """Answers whose last byte came this many milliseconds or more after their request started."""

    def __post_init__(self) -> None:
        if self.direction is not None and self.direction not in ("in", "out"):
            raise QueryError(f"direction is 'in' or 'out', not {self.direction!r}")
        if self.status is not None and not _STATUS.match(self.status):
            raise QueryError(f"status is a code (404), a class (4xx), 'errors' or 'ok', not {self.status!r}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=UTC))
        if self.since and self.until and self.since >= self.until:
            raise QueryError(f"since ({_iso(self.since)}) is not before until ({_iso(self.until)})")

    def is_empty(self) -> bool:
        """True when the filter matches every event."""
        return not self.to_json()

    def to_json(self) -> dict[str, Any]:
        """The set fields only, datetimes as ISO 8601 UTC: the stable wire form of a filter."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[f.name] = (
                _iso(value) if isinstance(value, datetime) else list(value) if f.name == "url" else value
            )
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Filter:
        """Read the wire form back; unknown fields and wrong types are refused, never ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise QueryError(f"unknown filter field {unknown[0]!r}; known: {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is None:
                continue
            if name in ("since", "until"):
                values[name] = parse_time(value)
            elif name == "url":
                words = [value] if isinstance(value, str) else value
                if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                    raise QueryError("url is a word or a list of words")
                values[name] = tuple(w for w in words if w)
            elif name == "slower_than_ms" and isinstance(value, int | float) and not isinstance(value, bool):
                values[name] = float(value)
            elif name == "status" and isinstance(value, int):
                values[name] = str(value)
            elif isinstance(value, str):
                values[name] = value
            else:
                raise QueryError(f"filter field {name!r} takes a string, not {type(value).__name__}")
        return cls(**values)

    def describe(self) -> str:
        """One line a person reads back: what this filter will match."""
        parts = [f"{k}={' '.join(v) if isinstance(v, list) else v}" for k, v in self.to_json().items()]
        return " ".join(parts) if parts else "every event"

    def merged(self, **changes: Any) -> Filter:
        """A copy with some fields changed (a screen narrowing a filter)."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Group:
    """One row of a counted view: its key and the figures summed from the events under it."""

    key: str | None
    events: int
    tokens_in: int
    tokens_out: int
    cost_usd: float

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "events": self.events,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": round(self.cost_usd, 9),
        }


def parse_time(value: str) -> datetime:
    """An ISO 8601 date or datetime; a value without a zone is UTC."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (TypeError, ValueError) as e:
        raise QueryError(f"not an ISO 8601 time: {value!r}") from e
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]


def _conditions(t: Table, flt: Filter) -> list[ColumnElement[bool]]:
    c = t.c
    out: list[ColumnElement[bool]] = []
    for name in ("kind", "direction", "tool", "session", "task", "turn", "agent", "model"):
        value = getattr(flt, name)
        if value is not None:
            out.append(c[name] == value)
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
    if flt.slower_than_ms is not None:
        out.append(c.last_byte_ms >= flt.slower_than_ms)
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


def _where(t: Table, flt: Filter) -> ColumnElement[bool]:
    conds = _conditions(t, flt)
    return and_(*conds) if conds else true()


def slowest_events(engine: Engine, flt: Filter, *, limit: int = 20) -> list[StoredEvent]:
    """Up to `limit` matching answers, slowest (last byte latest after the request) first; events
    without a timing (requests, older recordings) are left out."""
    t = EVENTS
    stmt = select(t).where(_where(t, flt), t.c.last_byte_ms.is_not(None))
    stmt = stmt.order_by(t.c.last_byte_ms.desc(), t.c.event_id).limit(max(0, limit))
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read events: {e}".splitlines()[0]) from e
    return [from_mapping(r) for r in rows]


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
    stmt = select(t).where(_where(t, flt))
    if before is not None:
        at, event_id = before
        at = _bind_time(t, at)
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) < tuple_(at, event_id))
    if after is not None:
        at, event_id = after
        at = _bind_time(t, at)
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) > tuple_(at, event_id))
    stmt = stmt.order_by(t.c.at.desc(), t.c.event_id.desc()).limit(max(0, limit))
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read events: {e}".splitlines()[0]) from e
    return [from_mapping(r) for r in rows]


def cursor(event: StoredEvent) -> Cursor:
    """The keyset position of an event in newest-first order."""
    return (event.at, event.event_id)


def _bucket(engine: Engine, t: Table) -> ColumnElement[Any]:
    """The hour an event falls in, as a value the database groups cheaply (formatted in Python)."""
    # Literals, not bound parameters, so the expression can match an index built on it.
    if engine.dialect.name == "postgresql":
        at: ColumnElement[Any] = t.c.at
        if getattr(t.c.at.type, "timezone", False):
            at = t.c.at.op("AT TIME ZONE")(literal_column("'UTC'"))
        return func.date_trunc(literal_column("'hour'"), at)
    # SQLite keeps SQLAlchemy datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' text: the hour is a prefix.
    return func.substr(t.c.at, literal_column("1"), literal_column("13"))


def _hour_key(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:00Z")
    text = str(value)
    return f"{text[:10]}T{text[11:13]}:00Z"


def counts(engine: Engine, flt: Filter, by: str) -> list[Group]:
    """Events, tokens and cost summed per hour, session, turn, kind, agent, model, tool or task.

    Hours come oldest first (a time line); every other view comes largest first, then by key.
    """
    if by not in GROUP_BYS:
        raise QueryError(f"cannot count by {by!r}; by one of: {', '.join(GROUP_BYS)}")
    t = EVENTS
    key = _bucket(engine, t) if by == "hour" else t.c[by]
    label = key.label("key")
    stmt = (
        select(
            label,
            func.count().label("events"),
            func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
            func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
            func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
        )
        .where(_where(t, flt))
        .group_by(key)
    )
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).all()
    except SQLAlchemyError as e:
        raise QueryError(f"cannot count events: {e}".splitlines()[0]) from e
    groups = [
        Group(
            key=_hour_key(r.key) if by == "hour" else (None if r.key is None else str(r.key)),
            events=int(r.events),
            tokens_in=int(r.tokens_in),
            tokens_out=int(r.tokens_out),
            cost_usd=float(r.cost_usd),
        )
        for r in rows
    ]
    if by == "hour":
        return sorted(groups, key=lambda g: g.key or "")
    return sorted(groups, key=lambda g: (-g.events, g.key is None, g.key or ""))


def totals(engine: Engine, flt: Filter) -> dict[str, Any]:
    """Everything the filter matches, summed: events, tokens, cost, distinct tools/models/sessions."""
    t = EVENTS
    stmt = select(
        func.count().label("events"),
        func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
        func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
        func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
        func.count(t.c.tool.distinct()).label("tools"),
        func.count(t.c.model.distinct()).label("models"),
        func.count(t.c.session.distinct()).label("sessions"),
        func.min(t.c.at).label("first"),
        func.max(t.c.at).label("last"),
    ).where(_where(t, flt))
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
        "distinct_tools": int(r.tools),
        "distinct_models": int(r.models),
        "distinct_sessions": int(r.sessions),
        "first": _iso(_utc(r.first)) if r.first is not None else None,
        "last": _iso(_utc(r.last)) if r.last is not None else None,
    }


# --- rows to values ----------------------------------------------------------------------------------


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def event_json(event: StoredEvent) -> dict[str, Any]:
    """An event as JSON, the Ledger's own stable form (`StoredEvent.to_json`)."""
    return event.to_json()


def groups_json(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [g.to_json() for g in groups]
