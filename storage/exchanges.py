"""Exchanges: one row per action (its request and everything that answered it), grouped in SQL.

A person browsing the Ledger came to see exchanges, not rows: one line per request with its status,
answer size, duration, model, tokens and cost. Two indexed reads make a page, so the millionth
exchange costs what the first does:

1. the page's *opening* events (an `http.request`, a `dispatch.call`, a stdio MCP call, ...) in the
   same keyset order `(at, event_id)` the event pages use, under the filter's action-wide fields
   (agent, host, url, ...);
   fields only an answer carries (status, model, kind, direction) are asked of any event of the
   action through an EXISTS on the `action_id` index;
2. the figures of those actions summed by the database, `GROUP BY action_id` over the `action_id` index.

Timing is read in one place (`timing`): the answer's first and last byte offsets from its request, as
capture measured them on the wire; for answers recorded before those columns (and kinds without
them), the duration is the answer event's `at` minus the request event's `at`, time to first byte unknown.

A stdio MCP session recorded by `flightlog mcp-record` has no HTTP exchange: there each request the
client (or the server) made opens one (`mcp.tools/call`, `mcp.initialize`, ...; its action is the
call's key `mcp:SESSION:call:c:ID`, `recording.mcp.stdio_events`) and its result by JSON-RPC id
answers it (`mcp.<method>.result`, or `mcp.result` for a call not seen), progress notifications inner;
the session's `mcp.start` opens the session's own action and `mcp.exit` answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import ColumnElement, Table, and_, case, exists, func, or_, select, tuple_
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.event_reads import select_events
from storage.events import StoredEvent
from storage.filters import Cursor, Filter, QueryError
from storage.kinds import (
    CONNECTION_ATTEMPT,
    DISPATCH_CALL,
    DISPATCH_DRY_RUN,
    DISPATCH_REFUSED,
    DISPATCH_REPLY,
    HTTP_REQUEST,
    HTTP_RESPONSE,
    MCP_EXIT,
    MCP_PREFIX,
    MCP_START,
)
from storage.queries import EVENTS, bind_time, conditions
from storage.rows import from_mapping

OPENING_KINDS: Final = (HTTP_REQUEST, DISPATCH_CALL, DISPATCH_DRY_RUN, CONNECTION_ATTEMPT)
"""Kinds that open an exchange (the first event of an action); a `connection.attempt` opens the
action of a refused CONNECT, raw connection or DNS question, whose `policy.refused` is its error."""
ANSWER_KINDS: Final = (HTTP_RESPONSE, DISPATCH_REPLY, DISPATCH_REFUSED)
"""Kinds that answer it: their status, size and time are the exchange's."""
ANSWER_FIELDS: Final = ("status", "model", "models", "kind", "direction", "streamed")
"""Filter fields asked of any event of the action (an opening event does not carry them)."""
STDIO_HOST: Final = "stdio"
"""The `host` of every event of a stdio MCP session."""
RESULT_SUFFIX: Final = ".result"
UNKNOWN_RESULT: Final = "mcp.result"
NOTIFICATION_PREFIX: Final = "mcp.notifications/"
CALL_KEY: Final = ":call:"


def opens(event: StoredEvent) -> bool:
    """Whether an event opens its exchange (the Python side of `_opens` below)."""
    if event.kind in OPENING_KINDS:
        return True
    if event.host != STDIO_HOST:
        return False
    if event.kind == MCP_START:
        return True
    return (
        event.kind.startswith(MCP_PREFIX)
        and CALL_KEY in event.action_id
        and not event.kind.endswith(RESULT_SUFFIX)
        and event.kind != UNKNOWN_RESULT
        and not event.kind.startswith(NOTIFICATION_PREFIX)
    )


def answers(event: StoredEvent) -> bool:
    """Whether an event answers its exchange (the Python side of `_answers` below)."""
    if event.kind in ANSWER_KINDS:
        return True
    return event.host == STDIO_HOST and (
        event.kind == MCP_EXIT or (event.kind.startswith(MCP_PREFIX) and event.kind.endswith(RESULT_SUFFIX))
    )


def _opens(t: Any) -> ColumnElement[bool]:
    stdio_call = and_(
        t.c.host == STDIO_HOST,
        t.c.kind.like(f"{MCP_PREFIX}%"),
        t.c.action_id.like(f"%{CALL_KEY}%"),
        ~t.c.kind.like(f"%{RESULT_SUFFIX}"),
        ~t.c.kind.like(f"{NOTIFICATION_PREFIX}%"),
    )
    return or_(t.c.kind.in_(OPENING_KINDS), and_(t.c.host == STDIO_HOST, t.c.kind == MCP_START), stdio_call)


def _answers(t: Any) -> ColumnElement[bool]:
    stdio = and_(
        t.c.host == STDIO_HOST,
        or_(t.c.kind == MCP_EXIT, and_(t.c.kind.like(f"{MCP_PREFIX}%"), t.c.kind.like(f"%{RESULT_SUFFIX}"))),
    )
    return or_(t.c.kind.in_(ANSWER_KINDS), stdio)


@dataclass(frozen=True, slots=True)
class Timing:
    """How long an exchange took, in milliseconds (None where unknown)."""

    duration_ms: float | None
    ttfb_ms: float | None


@dataclass(frozen=True, slots=True)
class Exchange:
    """One action summed: its opening event whole, and the figures of every event under it."""

    opening: StoredEvent
    events: int
    status: int | None
    error: str | None
    answer_at: datetime | None
    answer_size: int | None
    answer_state: str | None
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    inner: int
    """Events that are neither the opening nor the answer (WebSocket messages, the door's upstream
    call, MCP messages): the ones a list shows expandable under the exchange."""
    first_byte_ms: float | None = None
    last_byte_ms: float | None = None
    """The answer's first and last byte offsets from its request, where capture measured them."""
    mcp_tool: str | None = None
    """The tool an MCP message of the action names (a `tools/call`'s, on stdio or through the proxy)."""

    @property
    def action_id(self) -> str:
        return self.opening.action_id

    @property
    def timing(self) -> Timing:
        return timing(self.opening.at, self.answer_at, self.first_byte_ms, self.last_byte_ms)


def timing(
    request_at: datetime,
    answer_at: datetime | None,
    first_byte_ms: float | None = None,
    last_byte_ms: float | None = None,
) -> Timing:
    """Duration and time to first byte: the measured offsets where recorded, else the events' times."""
    if last_byte_ms is not None:
        return Timing(float(last_byte_ms), None if first_byte_ms is None else float(first_byte_ms))
    if answer_at is None:
        return Timing(None, None)
    return Timing(max(0.0, (_utc(answer_at) - _utc(request_at)).total_seconds() * 1000), None)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _split(flt: Filter) -> tuple[Filter, Filter]:
    """(fields every event of an action shares, fields only some event of it carries)."""
    answer = {name: getattr(flt, name) for name in ANSWER_FIELDS}
    cleared = {name: () if name == "models" else None for name in ANSWER_FIELDS}
    return flt.merged(**cleared), Filter(**answer)


def _opening_where(t: Table, flt: Filter) -> ColumnElement[bool]:
    shared, answer = _split(flt)
    conds = [_opens(t), *conditions(t, shared)]
    if not answer.is_empty():
        other = t.alias("other")
        inner = conditions(other, answer)  # type: ignore[arg-type]  # an alias has the table's columns
        conds.append(exists().where(other.c.action_id == t.c.action_id, *inner))
    return and_(*conds)


def select_exchanges(
    engine: Engine,
    flt: Filter,
    *,
    limit: int = 100,
    before: Cursor | None = None,
    after: Cursor | None = None,
) -> list[Exchange]:
    """Up to `limit` exchanges newest first, keyset-paged by their opening event (`cursor` of it).

    A filter sorted otherwise ("slowest calls today") is one top N in that order, with no next page
    and nothing newer to follow: oldest first by the opening event; slowest, fastest, costliest and
    largest by the events that order ranks (`storage.event_reads.select_events`), each exchange
    once, where its first event in that order stands."""
    t = EVENTS
    sort = flt.sort or "newest"
    if sort != "newest" and (before is not None or after is not None):
        return []
    if sort not in ("newest", "oldest"):
        return _ranked(engine, flt, limit)
    stmt = select(t).where(_opening_where(t, flt.merged(sort=None)))
    if before is not None:
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) < tuple_(bind_time(t, before[0]), before[1]))
    if after is not None:
        stmt = stmt.where(tuple_(t.c.at, t.c.event_id) > tuple_(bind_time(t, after[0]), after[1]))
    order = (t.c.at.asc(), t.c.event_id.asc()) if sort == "oldest" else (t.c.at.desc(), t.c.event_id.desc())
    stmt = stmt.order_by(*order).limit(max(0, limit))
    try:
        with engine.connect() as conn:
            openings = [from_mapping(r) for r in conn.execute(stmt).mappings().all()]
            figures = _figures(conn, t, [o.action_id for o in openings])
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read exchanges: {e}".splitlines()[0]) from e
    return [_exchange(o, figures.get(o.action_id)) for o in openings]


def _ranked(engine: Engine, flt: Filter, limit: int) -> list[Exchange]:
    """The top `limit` exchanges in the filter's order (see `select_exchanges`)."""
    size = max(limit, 1) * 4  # an exchange has a few events in the order; read more when it has more
    while True:
        events = select_events(engine, flt, limit=size)
        ranked = list(dict.fromkeys(e.action_id for e in events))[: max(0, limit)]
        if len(ranked) >= limit or len(events) < size:
            break
        size *= 4
    t = EVENTS
    stmt = select(t).where(_opens(t), t.c.action_id.in_(ranked))
    try:
        with engine.connect() as conn:
            openings = {
                o.action_id: o for o in (from_mapping(r) for r in conn.execute(stmt).mappings().all())
            }
            figures = _figures(conn, t, ranked)
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read exchanges: {e}".splitlines()[0]) from e
    return [_exchange(openings[a], figures.get(a)) for a in ranked if a in openings]


def _figures(conn: Any, t: Table, action_ids: list[str]) -> dict[str, Any]:
    """The summed figures of each action, one GROUP BY over the `action_id` index."""
    if not action_ids:
        return {}
    c = t.c
    is_answer = _answers(t)

    def answer(column: Any) -> Any:
        return func.max(case((is_answer, column)))

    stmt = (
        select(
            c.action_id,
            func.count().label("events"),
            answer(c.status).label("status"),
            func.max(c.error).label("error"),
            answer(c.at).label("answer_at"),
            func.sum(case((is_answer, c.payload_size))).label("answer_size"),
            answer(c.payload_state).label("answer_state"),
            func.max(c.model).label("model"),
            func.sum(c.tokens_in).label("tokens_in"),
            func.sum(c.tokens_out).label("tokens_out"),
            func.sum(c.cost_usd).label("cost_usd"),
            func.sum(case((or_(_opens(t), is_answer), 0), else_=1)).label("inner"),
            func.max(case((c.kind.like(f"{MCP_PREFIX}%"), c.tool))).label("mcp_tool"),
            answer(c.first_byte_ms).label("first_byte_ms"),
            answer(c.last_byte_ms).label("last_byte_ms"),
        )
        .where(c.action_id.in_(action_ids))
        .group_by(c.action_id)
    )
    return {r.action_id: r for r in conn.execute(stmt).all()}


def _answer_at(value: Any) -> datetime | None:
    if value is None:
        return None
    return _utc(datetime.fromisoformat(value) if isinstance(value, str) else value)


def _exchange(opening: StoredEvent, r: Any) -> Exchange:
    if r is None:
        return Exchange(opening, 1, None, opening.error, None, None, None, None, None, None, None, 0)
    return Exchange(
        opening=opening,
        events=int(r.events),
        status=None if r.status is None else int(r.status),
        error=r.error,
        answer_at=_answer_at(r.answer_at),
        answer_size=None if r.answer_size is None else int(r.answer_size),
        answer_state=r.answer_state,
        model=r.model,
        tokens_in=None if r.tokens_in is None else int(r.tokens_in),
        tokens_out=None if r.tokens_out is None else int(r.tokens_out),
        cost_usd=None if r.cost_usd is None else float(r.cost_usd),
        inner=int(r.inner or 0),
        first_byte_ms=None if r.first_byte_ms is None else float(r.first_byte_ms),
        last_byte_ms=None if r.last_byte_ms is None else float(r.last_byte_ms),
        mcp_tool=r.mcp_tool,
    )
