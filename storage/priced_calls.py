"""The model calls a price applies to, as recorded: their time, URL, model, token counts and cost.

What `recording.reprice` prices again with today's prices (a derived view: nothing is written).
Streamed from the database, so a long Ledger is read in pages, not held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.filters import Filter, QueryError
from storage.queries import EVENTS, timed, utc, where


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded model call's counts and recorded cost (None: it had no price then)."""

    at: datetime
    url: str | None
    model: str
    tokens_in: int | None
    tokens_out: int | None
    cache_read: int | None
    cache_write: int | None
    cost_usd: float | None


def recorded_calls(engine: Engine, flt: Filter) -> Iterator[Call]:
    """The model calls the filter matches that recorded tokens (the ones a price applies to)."""
    t = EVENTS
    source, took = timed(engine, t, flt)
    stmt = (
        select(t.c.at, t.c.url, t.c.model, t.c.tokens_in, t.c.tokens_out)
        .add_columns(t.c.cache_read_tokens, t.c.cache_write_tokens, t.c.cost_usd)
        .select_from(source)
        .where(where(t, flt, took), t.c.model.is_not(None))
        .where((t.c.tokens_in.is_not(None)) | (t.c.tokens_out.is_not(None)))
    )
    try:
        with engine.connect() as conn:
            for r in conn.execution_options(yield_per=1000).execute(stmt):
                at = utc(datetime.fromisoformat(r.at) if isinstance(r.at, str) else r.at)
                yield Call(at, r.url, r.model, r.tokens_in, r.tokens_out, r[5], r[6], r.cost_usd)
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read model calls: {e}".splitlines()[0]) from e
