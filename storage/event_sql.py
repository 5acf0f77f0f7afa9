"""A `Filter` as SQL text over the `events` table, in either database's dialect.

The one place a question's rows are written as SQL: `storage.queries` and `storage.tally` build
their statements from these pieces and run them on a DB-API connection (`storage.reader`), whether
it is the stdlib `sqlite3` connection of a read command or one lent by the engine of a running
proxy, so the same text answers on every door and no SQLAlchemy import is needed to read.

Placeholders are `?`; `storage.reader` turns them into psycopg's `%s`, so no text here holds a `?`
or a `%` of its own. Values from the question are always bound; what is written inline is ours
(kind names from `storage.kinds`, status numbers the `Filter` has validated).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal

from storage.filters import Filter
from storage.kinds import (
    DISPATCH_REFUSED,
    DISPATCH_REPLY,
    DISPATCH_UPSTREAM_RESPONSE,
    HTTP_RESPONSE,
    REFUSED,
    REFUSED_KINDS,
)
from storage.sqlite_setup import sqlite_time

Dialect = Literal["sqlite", "postgresql"]
ANSWER_KINDS: Final = (HTTP_RESPONSE, DISPATCH_UPSTREAM_RESPONSE, DISPATCH_REPLY, DISPATCH_REFUSED)
"""The kinds that answer a request: a filter on durations matches these (each took its action's time)."""
FILTER_COLUMNS: Final = ("kind", "direction", "tool", "session", "task", "turn", "agent", "model")
LIKE_ESCAPE: Final = "/"


def listed(values: tuple[str, ...]) -> str:
    """Our own constant names as a SQL list: `('a', 'b')` (never a value a user typed)."""
    return "(" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + ")"


def bind_time(dialect: Dialect, when: datetime) -> Any:
    """A time as the `at` column compares with it: SQLite's text form, PostgreSQL's aware UTC."""
    when = when.astimezone(UTC)
    return sqlite_time(when) if dialect == "sqlite" else when


def like_words(word: str) -> str:
    """`%word%` with LIKE's own characters escaped by `LIKE_ESCAPE` (a literal match, any case)."""
    for ch in (LIKE_ESCAPE, "%", "_"):
        word = word.replace(ch, LIKE_ESCAPE + ch)
    return f"%{word}%"


def conditions(dialect: Dialect, flt: Filter, params: list[Any], t: str = "events") -> list[str]:
    """The filter's conditions on table (or alias) `t`, each a SQL boolean; values appended to `params`."""
    out: list[str] = []
    for name in FILTER_COLUMNS:
        value = getattr(flt, name)
        if value is None:
            continue
        if name == "kind" and value == REFUSED:
            out.append(f"{t}.kind IN {listed(REFUSED_KINDS)}")
        else:
            out.append(f"{t}.{name} = ?")
            params.append(value)
    if flt.models:
        out.append(f"{t}.model IN ({', '.join('?' * len(flt.models))})")
        params.extend(flt.models)
    if flt.streamed is not None:
        out.append(f"{t}.first_token_ms IS {'NOT ' if flt.streamed else ''}NULL")
    if flt.host is not None:
        out.append(f"lower({t}.host) = ?")
        params.append(flt.host.lower())
    if flt.method is not None:
        out.append(f"{t}.method = ?")
        params.append(flt.method.upper())
    if flt.since is not None:
        out.append(f"{t}.at >= ?")
        params.append(bind_time(dialect, flt.since))
    if flt.until is not None:
        out.append(f"{t}.at < ?")
        params.append(bind_time(dialect, flt.until))
    for word in flt.url:
        out.append(f"lower({t}.url) LIKE lower(?) ESCAPE '{LIKE_ESCAPE}'")
        params.append(like_words(word))
    if flt.status is not None:
        out.append(status_condition(flt.status, t))
    return out


def status_condition(status: str, t: str = "events") -> str:
    """A status code, class or name as SQL (the `Filter` validated it: digits and words only).

    HTTP statuses are below 1000; a WebSocket close code (1000 and up) is judged by its `error`."""
    c = f"{t}.status"
    if status == "errors":
        return f"(({c} >= 400 AND {c} < 1000) OR {t}.error IS NOT NULL)"
    if status == "ok":
        return f"(({c} < 400 OR {c} >= 1000) AND {t}.error IS NULL)"
    if status.endswith("xx"):
        low = int(status[0]) * 100
        return f"({c} >= {low} AND {c} < {low + 100})"
    return f"{c} = {int(status)}"


def duration_ms(dialect: Dialect, end: str, start: str) -> str:
    """Milliseconds from `start` to `end`, in each dialect's own arithmetic."""
    if dialect == "postgresql":
        return f"(EXTRACT(epoch FROM {end} - {start}) * 1000)"
    return f"((julianday({end}) - julianday({start})) * 86400000.0)"


def timed(dialect: Dialect, flt: Filter) -> tuple[str, str | None]:
    """The FROM clause and the duration expression a filter needs (no join when it reads no durations).

    A duration is how long an answer took: its last byte's offset from its request (`last_byte_ms`,
    what capture measures on the wire) where one was recorded; else, for older recordings and kinds
    without timing, its `at` minus the earliest `at` of its action (the request that began it).
    """
    if not flt.timed:
        return "events", None
    started = "(SELECT action_id, min(at) AS started FROM events GROUP BY action_id) AS s"
    took = f"coalesce(events.last_byte_ms, {duration_ms(dialect, 'events.at', 's.started')})"
    return f"events JOIN {started} ON s.action_id = events.action_id", took


def where(dialect: Dialect, flt: Filter, params: list[Any], took: str | None = None) -> str:
    """The WHERE clause's body (`1 = 1` for a filter matching everything)."""
    conds = conditions(dialect, flt, params)
    if took is not None:
        conds.append(f"events.kind IN {listed(ANSWER_KINDS)}")
        if flt.min_duration_ms is not None:
            conds.append(f"{took} >= ?")
            params.append(flt.min_duration_ms)
        if flt.max_duration_ms is not None:
            conds.append(f"{took} < ?")
            params.append(flt.max_duration_ms)
    return " AND ".join(conds) if conds else "1 = 1"


def order(flt: Filter, took: str | None) -> str:
    """The ORDER BY list of a page: newest first unless the filter sorts otherwise."""
    sort = flt.sort or "newest"
    newest = "events.at DESC, events.event_id DESC"
    if sort == "oldest":
        return "events.at ASC, events.event_id ASC"
    if sort in ("slowest", "fastest") and took is not None:
        return f"{took} {'DESC' if sort == 'slowest' else 'ASC'}, {newest}"
    if sort == "costliest":
        return f"coalesce(events.cost_usd, -1) DESC, {newest}"
    if sort == "largest":
        return f"coalesce(events.payload_size, -1) DESC, {newest}"
    return newest


def bucket(dialect: Dialect) -> str:
    """The hour an event falls in, as a value the database groups cheaply (formatted in Python).

    Written as the hour index of migrations 0001 and 0007 is, so the count can read that index."""
    if dialect == "postgresql":
        return "date_trunc('hour', events.at AT TIME ZONE 'UTC')"
    # SQLite keeps datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff' text: the hour is a prefix.
    return "substr(events.at, 1, 13)"


def rule_of(dialect: Dialect) -> str:
    """The rule (or limit) a refusal names: its `error` up to the first colon (`RULE: why`, as the
    door and the egress policy write it); NULL for any other event."""
    if dialect == "postgresql":
        prefix = "split_part(events.error, ':', 1)"
    else:
        prefix = "substr(events.error, 1, instr(events.error, ':') - 1)"
    return f"CASE WHEN events.kind IN {listed(REFUSED_KINDS)} THEN {prefix} ELSE NULL END"


def group_key(dialect: Dialect, by: str) -> str:
    """What a count by `by` groups on: a column, the hour bucket, or a refusal's rule (`by` is one
    of `GROUP_BYS`, checked by the caller)."""
    if by == "hour":
        return bucket(dialect)
    if by == "rule":
        return rule_of(dialect)
    if by == "model":
        return ACTION_MODEL
    return f"events.{by}"


ACTION_MODEL: Final = (
    "coalesce(events.model, (SELECT max(m.model) FROM events m"
    " WHERE m.action_id = events.action_id AND m.model IS NOT NULL))"
)
"""The model an event is filed under: its own, else its action's (the model its answer named, or the
request's body did): capture writes the model on the answer event, and a request, its MCP messages or
its refusal belong to the same call, so counting by model files them there and not under none."""


UNPRICED: Final = (
    "CASE WHEN events.cost_usd IS NULL"
    " AND (events.tokens_in IS NOT NULL OR events.tokens_out IS NOT NULL) THEN 1 ELSE 0 END"
)
"""A model call with tokens and no cost (no price known for its model). Only a model's answer carries
tokens, so the columns of SQLite's hour index are enough: a count by hour stays a covering index scan."""
SUMS: Final = (
    "count(*) AS events, coalesce(sum(events.tokens_in), 0) AS tokens_in,"
    " coalesce(sum(events.tokens_out), 0) AS tokens_out, coalesce(sum(events.cost_usd), 0) AS cost_usd,"
    f" coalesce(sum({UNPRICED}), 0) AS unpriced"
)
"""Events, tokens and cost summed, and the calls the cost leaves out (`unpriced`: shown beside it, so
an unknown model is never read as $0): the figures of every counted view."""
