"""What a caller has spent on model calls, summed by the database: what an egress budget counts.

The usage columns (`tokens_in`, `tokens_out`, `cost_usd`) are set on the events that answered a model
call (`recording.usage`); a sum over one agent's (session's, task's) events since a time reads the
`(agent, at)` index and those rows only. `committed` says which of some events are stored yet, so a
budget can wait for the answers it has seen go out to be counted before it judges the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.errors import StorageError
from storage.queries import EVENTS, bind_time

WHO_COLUMNS: Final = ("agent", "session", "task")


def spent(engine: Engine, per: str, who: str | None, since: datetime | None) -> tuple[int, float]:
    """(tokens in + out, cost in USD) of the events whose `per` column is `who` (NULL when None),
    at or after `since` (everything when None)."""
    if per not in WHO_COLUMNS:
        raise StorageError(f"usage is summed per {', '.join(WHO_COLUMNS)}, not {per!r}")
    t = EVENTS
    column = t.c[per]
    conds = [column == who if who is not None else column.is_(None)]
    if since is not None:
        conds.append(t.c.at >= bind_time(t, since))
    conds.append(or_(t.c.tokens_in.is_not(None), t.c.tokens_out.is_not(None), t.c.cost_usd.is_not(None)))
    stmt = select(
        func.coalesce(func.sum(t.c.tokens_in), 0) + func.coalesce(func.sum(t.c.tokens_out), 0),
        func.coalesce(func.sum(t.c.cost_usd), 0.0),
    ).where(*conds)
    try:
        with engine.connect() as conn:
            tokens, cost = conn.execute(stmt).one()
    except SQLAlchemyError as e:
        raise StorageError(f"cannot sum usage: {e}".splitlines()[0]) from e
    return int(tokens), float(cost)


def committed(engine: Engine, event_ids: Sequence[str]) -> set[str]:
    """Which of `event_ids` the Ledger holds."""
    if not event_ids:
        return set()
    t = EVENTS
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(t.c.event_id).where(t.c.event_id.in_(list(event_ids)))).all()
    except SQLAlchemyError as e:
        raise StorageError(f"cannot look events up: {e}".splitlines()[0]) from e
    return {r[0] for r in rows}
