"""The `Filter`'s questions answered: newest-first pages, counted views, totals, one event, one action.

One implementation for every door: a read command passes the read-only `Reader` it opened
(`storage.reader.open_reader`, no SQLAlchemy), the proxy's routes and the browser pass their
engine, whose pool lends a connection for the same SQL text (`storage.event_sql`). Pages use a
keyset cursor `(at, event_id)` so the millionth row costs what the first one does (an OFFSET would
scan everything before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from storage import event_sql as sql
from storage.events import StoredEvent
from storage.filters import GROUP_BYS, Cursor, Filter, Group, QueryError, iso
from storage.reader import Reader, reading
from storage.rows import from_mapping

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


def select_events(
    source: Engine | Reader,
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
    if (before is not None or after is not None) and (flt.sort or "newest") != "newest":
        raise QueryError(f"sort {flt.sort} is a top N: it has no next page (narrow the filter instead)")
    with reading(source) as r:
        params: list[Any] = []
        source_sql, took = sql.timed(r.dialect, flt)
        conds = [sql.where(r.dialect, flt, params, took)]
        for mark, op in ((before, "<"), (after, ">")):
            if mark is not None:
                conds.append(f"(events.at, events.event_id) {op} (?, ?)")
                params += [sql.bind_time(r.dialect, mark[0]), mark[1]]
        text = (
            f"SELECT events.* FROM {source_sql} WHERE {' AND '.join(conds)}"
            f" ORDER BY {sql.order(flt, took)} LIMIT {max(0, int(limit))}"
        )
        rows = r.rows(text, params, "read events")
    return [from_mapping(row) for row in rows]


def cursor(event: StoredEvent) -> Cursor:
    """The keyset position of an event in newest-first order."""
    return (event.at, event.event_id)


def hour_key(value: Any) -> str | None:
    """An hour bucket as `YYYY-MM-DDTHH:00Z`, from either database's form of it."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:00Z")
    text = str(value)
    return f"{text[:10]}T{text[11:13]}:00Z"


def counts(source: Engine | Reader, flt: Filter, by: str) -> list[Group]:
    """Events, tokens and cost summed per hour, session, turn, kind, agent, model, tool or task.

    Hours come oldest first (a time line); every other view comes largest first, then by key.
    """
    if by not in GROUP_BYS:
        raise QueryError(f"cannot count by {by!r}; by one of: {', '.join(GROUP_BYS)}")
    with reading(source) as r:
        params: list[Any] = []
        source_sql, took = sql.timed(r.dialect, flt)
        text = (
            f"SELECT {sql.group_key(r.dialect, by)} AS key, {sql.SUMS} FROM {source_sql}"
            f" WHERE {sql.where(r.dialect, flt, params, took)} GROUP BY 1"
        )
        rows = r.rows(text, params, "count events")
    groups = [
        Group(
            key=hour_key(row["key"]) if by == "hour" else (None if row["key"] is None else str(row["key"])),
            events=int(row["events"]),
            tokens_in=int(row["tokens_in"]),
            tokens_out=int(row["tokens_out"]),
            cost_usd=float(row["cost_usd"]),
            unpriced=int(row["unpriced"]),
        )
        for row in rows
    ]
    if by == "hour":
        return sorted(groups, key=lambda g: g.key or "")
    return sorted(groups, key=lambda g: (-g.events, g.key is None, g.key or ""))


def totals(source: Engine | Reader, flt: Filter) -> dict[str, Any]:
    """Everything the filter matches, summed: events, tokens, cost, distinct tools/models/sessions."""
    with reading(source) as r:
        params: list[Any] = []
        source_sql, took = sql.timed(r.dialect, flt)
        text = (
            f"SELECT {sql.SUMS}, count(DISTINCT events.tool) AS tools,"
            " count(DISTINCT events.model) AS models, count(DISTINCT events.session) AS sessions,"
            ' min(events.at) AS "first", max(events.at) AS "last"'
            f" FROM {source_sql} WHERE {sql.where(r.dialect, flt, params, took)}"
        )
        row = r.rows(text, params, "count events")[0]
    return {
        "events": int(row["events"]),
        "tokens_in": int(row["tokens_in"]),
        "tokens_out": int(row["tokens_out"]),
        "cost_usd": round(float(row["cost_usd"]), 9),
        "unpriced": int(row["unpriced"]),
        "distinct_tools": int(row["tools"]),
        "distinct_models": int(row["models"]),
        "distinct_sessions": int(row["sessions"]),
        "first": iso(utc(row["first"])) if row["first"] is not None else None,
        "last": iso(utc(row["last"])) if row["last"] is not None else None,
    }


def event(source: Engine | Reader, event_id: str) -> StoredEvent | None:
    """One event whole, or None."""
    with reading(source) as r:
        rows = r.rows("SELECT * FROM events WHERE event_id = ?", [event_id], "read an event")
    return from_mapping(rows[0]) if rows else None


def action(source: Engine | Reader, action_id: str) -> list[StoredEvent]:
    """Every event of one action, in (at, seq, event_id) order."""
    text = "SELECT * FROM events WHERE action_id = ? ORDER BY at, seq, event_id"
    with reading(source) as r:
        rows = r.rows(text, [action_id], "read an action")
    return [from_mapping(row) for row in rows]


# --- rows to values ----------------------------------------------------------------------------------


def utc(value: Any) -> datetime:
    """A time from either database (SQLite's text, PostgreSQL's datetime) as aware UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def event_json(event: StoredEvent) -> dict[str, Any]:
    """An event as JSON, the Ledger's own stable form (`StoredEvent.to_json`)."""
    return event.to_json()


def groups_json(groups: Sequence[Group]) -> list[dict[str, Any]]:
    return [g.to_json() for g in groups]
