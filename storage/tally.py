"""Counted views beyond one key, how long answers took, and where each collector stands.

    tally(engine, flt, by=["model", "host"])  -> events, tokens and cost summed per combination of keys
    tally_answer(engine, flt, by)             -> the same with the filter, the keys and the sums: the
                                                 one answer of `GET /api/ledger/tally` and `ledger tally`
    durations(engine, events)                 -> each answer event's milliseconds (its action's time)
    collectors(engine)                        -> each collector's position, last commit, lag and drops
    state_answer(engine)                      -> `{"collectors": ...}`: `/api/ledger/state`, `ledger state`

All three are reads over the Ledger's own tables (`events`, `batches`, `positions`) in SQLAlchemy Core,
unchanged on SQLite and PostgreSQL. A duration is computed from what every ledger holds (an answer's
`at` minus the first `at` of its action), the same number `queries.timed` filters and sorts on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.events import StoredEvent
from storage.filters import GROUP_BYS, Filter, QueryError, iso
from storage.kinds import CAPTURE_OVERFLOW
from storage.queries import (
    ANSWER_KINDS,
    EVENTS,
    duration_ms,
    group_key,
    hour_key,
    timed,
    unpriced,
    utc,
    where,
)
from storage.schema import BatchRow, PositionRow

TALLY_KEYS_MAX: Final = 3
OVERFLOW_KIND: Final = CAPTURE_OVERFLOW
"""The event the writer leaves when its queue was full; the number of items dropped is its `error`."""


def tally(engine: Engine, flt: Filter, by: Sequence[str]) -> list[dict[str, Any]]:
    """Events, tokens and cost summed per combination of 1 to 3 keys, largest first."""
    keys = list(dict.fromkeys(by))
    if not 1 <= len(keys) <= TALLY_KEYS_MAX:
        raise QueryError(f"tally counts by 1 to {TALLY_KEYS_MAX} of: {', '.join(GROUP_BYS)}")
    for k in keys:
        if k not in GROUP_BYS:
            raise QueryError(f"cannot count by {k!r}; by one of: {', '.join(GROUP_BYS)}")
    t = EVENTS
    source, took = timed(engine, t, flt)
    columns = [group_key(engine, t, k).label(f"k_{k}") for k in keys]
    stmt = (
        select(
            *columns,
            func.count().label("events"),
            func.coalesce(func.sum(t.c.tokens_in), 0).label("tokens_in"),
            func.coalesce(func.sum(t.c.tokens_out), 0).label("tokens_out"),
            func.coalesce(func.sum(t.c.cost_usd), 0).label("cost_usd"),
            unpriced(t).label("unpriced"),
        )
        .select_from(source)
        .where(where(t, flt, took))
        .group_by(*columns)
    )
    rows = _all(engine, stmt, "count events")
    out = []
    for r in rows:
        key = {k: _key(k, getattr(r, f"k_{k}")) for k in keys}
        out.append(
            {
                "key": key,
                "events": int(r.events),
                "tokens_in": int(r.tokens_in),
                "tokens_out": int(r.tokens_out),
                "cost_usd": round(float(r.cost_usd), 9),
                "unpriced": int(r.unpriced),
            }
        )
    return sorted(out, key=lambda g: (-g["events"], [str(v) for v in g["key"].values()]))


def tally_answer(engine: Engine, flt: Filter, by: Sequence[str]) -> dict[str, Any]:
    """The tally as the read route and the command line answer it: the filter, the keys, the groups,
    and their sums (so the route and `flightlog ledger tally --json` are the same object)."""
    keys = list(dict.fromkeys(by))
    groups = tally(engine, flt, keys)
    return {
        "filter": flt.to_json(),
        "by": keys,
        "groups": groups,
        "events": sum(g["events"] for g in groups),
        "tokens_in": sum(g["tokens_in"] for g in groups),
        "tokens_out": sum(g["tokens_out"] for g in groups),
        "cost_usd": round(sum(g["cost_usd"] for g in groups), 9),
        "unpriced": sum(g["unpriced"] for g in groups),
    }


def state_answer(engine: Engine) -> dict[str, Any]:
    """Where each collector stands, as `/api/ledger/state` and `flightlog ledger state` answer it."""
    return {"collectors": collectors(engine)}


def _key(name: str, value: Any) -> str | None:
    if value is None:
        return None
    return hour_key(value) if name == "hour" else str(value)


def durations(engine: Engine, events: Sequence[StoredEvent]) -> dict[str, int]:
    """Milliseconds each answer event of `events` took (answer `at` minus its action's first `at`)."""
    answers = [e for e in events if e.kind in ANSWER_KINDS]
    if not answers:
        return {}
    t = EVENTS
    actions = sorted({e.action_id for e in answers})
    stmt = select(t.c.action_id, func.min(t.c.at).label("started")).where(t.c.action_id.in_(actions))
    started = {
        r.action_id: utc(r.started) for r in _all(engine, stmt.group_by(t.c.action_id), "time answers")
    }
    out = {}
    for e in answers:
        begin = started.get(e.action_id)
        if begin is not None:
            out[e.event_id] = max(0, round((utc(e.at) - begin).total_seconds() * 1000))
    return out


def collectors(engine: Engine, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each collector: its delivered position, last commit, seconds since (lag), batches and drops.

    Drops are what the writer could not queue, counted from its `capture.overflow` events.
    """
    now = now or datetime.now(UTC)
    p, b, t = PositionRow.__table__, BatchRow.__table__, EVENTS  # type: ignore[attr-defined]
    positions = _all(engine, select(p.c.collector, p.c.position, p.c.updated_at), "read positions")
    batches = {
        r.collector: r
        for r in _all(
            engine,
            select(
                b.c.collector,
                func.count().label("batches"),
                func.coalesce(func.sum(b.c.new), 0).label("new"),
                func.coalesce(func.sum(b.c.duplicates), 0).label("duplicates"),
                func.max(b.c.committed_at).label("last_commit"),
            ).group_by(b.c.collector),
            "read batches",
        )
    }
    overflow = select(t.c.collector, t.c.error).where(t.c.kind == OVERFLOW_KIND)
    drops: dict[str, int] = {}
    for r in _all(engine, overflow, "read drops"):
        drops[r.collector] = drops.get(r.collector, 0) + _count(r.error)
    out = []
    for r in sorted(positions, key=lambda r: r.collector):
        batch = batches.get(r.collector)
        last = utc(batch.last_commit) if batch is not None and batch.last_commit is not None else None
        out.append(
            {
                "collector": r.collector,
                "position": int(r.position),
                "updated_at": iso(utc(r.updated_at)),
                "batches": int(batch.batches) if batch is not None else 0,
                "events_new": int(batch.new) if batch is not None else 0,
                "duplicates": int(batch.duplicates) if batch is not None else 0,
                "last_commit": iso(last) if last is not None else None,
                "lag_seconds": round((now - last).total_seconds(), 3) if last is not None else None,
                "drops": drops.get(r.collector, 0),
            }
        )
    return out


def _count(error: str | None) -> int:
    """The number an overflow event carries (its first whole number), 1 when it names none."""
    digits = "".join(ch if ch.isdigit() else " " for ch in error or "").split()
    return int(digits[0]) if digits else 1


def _all(engine: Engine, stmt: Any, doing: str) -> list[Any]:
    try:
        with engine.connect() as conn:
            return list(conn.execute(stmt).all())
    except SQLAlchemyError as e:
        raise QueryError(f"cannot {doing}: {e}".splitlines()[0]) from e


__all__ = ["collectors", "duration_ms", "durations", "state_answer", "tally", "tally_answer"]
