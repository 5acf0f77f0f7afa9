"""The model calls a price applies to, as recorded: their time, URL, model, token counts and cost.

What `recording.reprice` prices again with today's prices (a derived view: nothing is written).
Read through the one read path (`storage.reader`), so `ledger reprice` needs no SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from storage import event_sql as sql
from storage.event_reads import utc
from storage.filters import Filter
from storage.reader import Reader, reading

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


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
    cache_write_1h: int | None
    cost_usd: float | None


def recorded_calls(source: Engine | Reader, flt: Filter) -> Iterator[Call]:
    """The model calls the filter matches that recorded tokens (the ones a price applies to)."""
    with reading(source) as r:
        params: list[object] = []
        frm, took = sql.timed(r.dialect, flt)
        text = (
            "SELECT events.at, events.url, events.model, events.tokens_in, events.tokens_out,"
            " events.cache_read_tokens, events.cache_write_tokens, events.cache_write_1h_tokens,"
            " events.cost_usd"
            f" FROM {frm} WHERE {sql.where(r.dialect, flt, params, took)} AND events.model IS NOT NULL"
            " AND (events.tokens_in IS NOT NULL OR events.tokens_out IS NOT NULL)"
        )
        rows = r.rows(text, params, "read model calls")
    for row in rows:
        yield Call(
            utc(row["at"]),
            row["url"],
            row["model"],
            row["tokens_in"],
            row["tokens_out"],
            row["cache_read_tokens"],
            row["cache_write_tokens"],
            row["cache_write_1h_tokens"],
            row["cost_usd"],
        )
