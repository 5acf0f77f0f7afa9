"""Questions to the Ledger as SQLAlchemy Core: the `Filter`'s conditions for the queries still written
in Core, the exchanges' list, the time line and the usage sums (`storage.exchanges`,
`storage.timeline`, `storage.usage_totals`).

Every screen, route and command asks the Ledger through the same frozen `Filter` (`storage.filters`), so a
question typed in plain words (`storage.questions.reading`), a filter POSTed as JSON and the TUI's filter bar
all mean the same rows. Pages, counted views and totals are `storage.event_reads`' (SQL text any DB-API
connection runs, so a read command needs no SQLAlchemy); the clauses here are the same text
(`storage.event_sql`) made Core clauses.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import BindParameter, ColumnElement, Table, and_, bindparam, literal_column, text, true
from sqlalchemy.engine import Engine

from storage import event_sql
from storage.filters import Filter
from storage.schema import EventRow

EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]


def conditions(t: Table, flt: Filter) -> list[Any]:
    """The filter's conditions on `t` (the table or an alias of it): `event_sql.conditions`, the one
    text of them, each a textual clause with its values bound by name (a time through the `at`
    column's own type, so each dialect gets it in its stored form)."""
    params: list[Any] = []
    texts = event_sql.conditions("postgresql", flt, params, t.name)
    values = iter(params)
    out = []
    for cond in texts:
        first, *rest = cond.split("?")
        binds: list[BindParameter[Any]] = []
        for piece in rest:
            value = next(values)
            binds.append(
                bindparam(
                    f"flt_{next(_BIND_NAMES)}",
                    value,
                    type_=t.c.at.type if isinstance(value, datetime) else None,
                )
            )
            first += f":{binds[-1].key}{piece}"
        out.append(text(first).bindparams(*binds))
    return out


_BIND_NAMES = itertools.count()
"""Names for the conditions' values, unique in any statement that joins several filters' conditions."""


def bind_time(t: Table, when: datetime) -> datetime:
    """UTC, naive where the column keeps naive UTC (SQLite, or a PostgreSQL timestamp without zone)."""
    when = when.astimezone(UTC)
    return when if getattr(t.c.at.type, "timezone", False) else when.replace(tzinfo=None)


def where(t: Table, flt: Filter) -> ColumnElement[bool]:
    """The filter's conditions joined (durations aside: they need `event_sql.timed`'s join)."""
    conds = conditions(t, flt)
    return and_(*conds) if conds else true()


def bucket(engine: Engine, t: Table) -> ColumnElement[Any]:
    """The hour an event falls in (`event_sql.bucket`: written as the hour index is)."""
    return literal_column(event_sql.bucket(_dialect(engine)))


def group_key(engine: Engine, t: Table, by: str) -> ColumnElement[Any]:
    """What a count by `by` groups on: a column, the hour bucket, or a refusal's rule (`event_sql`)."""
    return literal_column(event_sql.group_key(_dialect(engine), by))


def _dialect(engine: Engine) -> event_sql.Dialect:
    return "postgresql" if engine.dialect.name == "postgresql" else "sqlite"
