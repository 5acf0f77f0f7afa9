"""Counted answers in both units: exchanges (one request with everything that answered it: an
action) and events (the Ledger's rows), per key and in total, ranked by what the question named.

"how many calls did delta make" counted events before, two per exchange; here every count says which
it is and carries both. An exchange is counted once under its key: the action's value of it (an
action's request carries no model, its answer does, so the exchange falls under the model), the hour
it began in; only `kind` differs along an action, and counts the exchanges having an event of it.
Events, tokens and cost per key are the rows' own (`storage.event_reads.counts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage import event_sql as sql
from storage.event_reads import counts, hour_key, totals
from storage.filters import Filter
from storage.reader import Reader, reading

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

RANKS = ("exchanges", "events", "tokens", "cost")


def exchanges(source: Engine | Reader, flt: Filter) -> int:
    """How many exchanges (distinct actions) have an event the filter matches."""
    with reading(source) as r:
        params: list[Any] = []
        frm, took = sql.timed(r.dialect, flt)
        cond = sql.where(r.dialect, flt, params, took)
        text = f"SELECT count(DISTINCT events.action_id) AS n FROM {frm} WHERE {cond}"
        return int(r.rows(text, params, "count exchanges")[0]["n"])


def exchanges_by(source: Engine | Reader, flt: Filter, by: str) -> dict[str | None, int]:
    """Exchanges per key: each action once, under its own value of the key (see the module)."""
    with reading(source) as r:
        params: list[Any] = []
        frm, took = sql.timed(r.dialect, flt)
        key = sql.group_key(r.dialect, by)
        cond = sql.where(r.dialect, flt, params, took)
        if by == "kind":
            text = (
                f"SELECT {key} AS k, count(DISTINCT events.action_id) AS n FROM {frm} WHERE {cond} GROUP BY 1"
            )
        else:
            pick = "min" if by == "hour" else "max"
            text = (
                f"SELECT a.k AS k, count(*) AS n FROM (SELECT events.action_id AS action_id,"
                f" {pick}({key}) AS k FROM {frm} WHERE {cond} GROUP BY events.action_id) AS a GROUP BY a.k"
            )
        rows = r.rows(text, params, "count exchanges")
    return {_key(by, row["k"]): int(row["n"]) for row in rows}


def _key(by: str, value: Any) -> str | None:
    if value is None:
        return None
    return hour_key(value) if by == "hour" else str(value)


def ranked(
    source: Engine | Reader,
    flt: Filter,
    by: str,
    rank: str | None,
    ascending: bool = False,
    limit: int | None = None,
) -> dict[str, Any]:
    """Rows per key, each with exchanges, events, tokens and cost, ranked by `rank` (largest first
    unless `ascending`; no rank: as `counts` orders them), at most `limit` of them; and the total
    of everything the filter matches (not only the rows kept)."""
    groups = [g.to_json() for g in counts(source, flt, by)]
    per = exchanges_by(source, flt, by)
    seen = {g["key"] for g in groups}
    for g in groups:
        g["exchanges"] = per.get(g["key"], 0)
        g["tokens"] = g["tokens_in"] + g["tokens_out"]
    for key in per.keys() - seen:  # a key only some exchange's other event carries (none here)
        groups.append(
            {"key": key, "events": 0, "exchanges": per[key], "tokens_in": 0, "tokens_out": 0, "tokens": 0}
            | {"cost_usd": 0.0, "unpriced": 0}
        )
    if rank is not None:
        field = "cost_usd" if rank == "cost" else rank
        sign = 1 if ascending else -1
        groups.sort(key=lambda g: (sign * g[field], g["key"] is None, g["key"] or ""))
    if limit is not None:
        groups = groups[:limit]
    return {"groups": groups, "total": total(source, flt)}


def total(source: Engine | Reader, flt: Filter) -> dict[str, Any]:
    """Everything the filter matches summed (`storage.event_reads.totals`), with its exchanges."""
    out = totals(source, flt)
    return {"exchanges": exchanges(source, flt), **out, "tokens": out["tokens_in"] + out["tokens_out"]}
