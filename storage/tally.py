"""Counted views beyond one key, how long answers took, and where each collector stands.

    tally(source, flt, by=["model", "host"])  -> events, tokens and cost summed per combination of keys
    tally_answer(source, flt, by)             -> the same with the filter, the keys and the sums: the
                                                 one answer of `GET /api/ledger/tally` and `ledger tally`
    durations(source, events)                 -> each answer event's milliseconds (its action's time)
    collectors(source)                        -> each collector's position, last commit, lag and drops
    state_answer(source)                      -> `{"collectors": ...}`: `/api/ledger/state`, `ledger state`

All are reads over the Ledger's own tables (`events`, `batches`, `positions`) in SQL text
(`storage.event_sql`) that a read command's `Reader` and an engine's lent connection run alike
(`source`). A duration is computed from what every ledger holds (an answer's `at` minus the first
`at` of its action), the same number `event_sql.timed` filters and sorts on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from storage import event_sql as sql
from storage.event_reads import hour_key, utc
from storage.events import StoredEvent
from storage.filters import GROUP_BYS, Filter, QueryError, iso
from storage.kinds import CAPTURE_OVERFLOW
from storage.reader import Reader, reading

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

TALLY_KEYS_MAX: Final = 3
OVERFLOW_KIND: Final = CAPTURE_OVERFLOW
"""The event the writer leaves when its queue was full; the number of items dropped is its `error`."""


def tally(source: Engine | Reader, flt: Filter, by: Sequence[str]) -> list[dict[str, Any]]:
    """Events, tokens and cost summed per combination of 1 to 3 keys, largest first."""
    keys = list(dict.fromkeys(by))
    if not 1 <= len(keys) <= TALLY_KEYS_MAX:
        raise QueryError(f"tally counts by 1 to {TALLY_KEYS_MAX} of: {', '.join(GROUP_BYS)}")
    for k in keys:
        if k not in GROUP_BYS:
            raise QueryError(f"cannot count by {k!r}; by one of: {', '.join(GROUP_BYS)}")
    with reading(source) as r:
        params: list[Any] = []
        source_sql, took = sql.timed(r.dialect, flt)
        columns = ", ".join(f"{sql.group_key(r.dialect, k)} AS k_{k}" for k in keys)
        places = ", ".join(str(i) for i in range(1, len(keys) + 1))
        text = (
            f"SELECT {columns}, {sql.SUMS} FROM {source_sql}"
            f" WHERE {sql.where(r.dialect, flt, params, took)} GROUP BY {places}"
        )
        rows = r.rows(text, params, "count events")
    out = []
    for row in rows:
        key = {k: _key(k, row[f"k_{k}"]) for k in keys}
        out.append(
            {
                "key": key,
                "events": int(row["events"]),
                "tokens_in": int(row["tokens_in"]),
                "tokens_out": int(row["tokens_out"]),
                "cost_usd": round(float(row["cost_usd"]), 9),
                "unpriced": int(row["unpriced"]),
            }
        )
    return sorted(out, key=lambda g: (-g["events"], [str(v) for v in g["key"].values()]))


def tally_answer(source: Engine | Reader, flt: Filter, by: Sequence[str]) -> dict[str, Any]:
    """The tally as the read route and the command line answer it: the filter, the keys, the groups,
    and their sums (so the route and `flightlog ledger tally --json` are the same object)."""
    keys = list(dict.fromkeys(by))
    groups = tally(source, flt, keys)
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


def state_answer(source: Engine | Reader) -> dict[str, Any]:
    """Where each collector stands, as `/api/ledger/state` and `flightlog ledger state` answer it."""
    return {"collectors": collectors(source)}


def _key(name: str, value: Any) -> str | None:
    if value is None:
        return None
    return hour_key(value) if name == "hour" else str(value)


def durations(source: Engine | Reader, events: Sequence[StoredEvent]) -> dict[str, int]:
    """Milliseconds each answer event of `events` took: its `last_byte_ms` where capture measured it,
    else its `at` minus its action's first `at` (the measure `slowest` sorts by, `event_sql.timed`)."""
    answers = [e for e in events if e.kind in sql.ANSWER_KINDS]
    if not answers:
        return {}
    actions = sorted({e.action_id for e in answers})
    started: dict[str, datetime] = {}
    with reading(source) as r:
        for i in range(0, len(actions), 500):
            chunk = actions[i : i + 500]
            text = (
                "SELECT action_id, min(at) AS started FROM events"
                f" WHERE action_id IN ({', '.join('?' * len(chunk))}) GROUP BY action_id"
            )
            started.update(
                (row["action_id"], utc(row["started"])) for row in r.rows(text, chunk, "time answers")
            )
    out = {}
    for e in answers:
        begin = started.get(e.action_id)
        if e.last_byte_ms is not None:
            out[e.event_id] = max(0, round(e.last_byte_ms))
        elif begin is not None:
            out[e.event_id] = max(0, round((utc(e.at) - begin).total_seconds() * 1000))
    return out


def collectors(source: Engine | Reader, now: datetime | None = None) -> list[dict[str, Any]]:
    """Each collector: its delivered position, last commit, seconds since (lag), batches and drops.

    Drops are what the writer could not queue, counted from its `capture.overflow` events.
    """
    now = now or datetime.now(UTC)
    with reading(source) as r:
        positions = r.rows("SELECT collector, position, updated_at FROM positions", (), "read positions")
        batches = {
            row["collector"]: row
            for row in r.rows(
                "SELECT collector, count(*) AS batches, coalesce(sum(new), 0) AS new,"
                " coalesce(sum(duplicates), 0) AS duplicates, max(committed_at) AS last_commit"
                " FROM batches GROUP BY collector",
                (),
                "read batches",
            )
        }
        overflow = "SELECT collector, error FROM events WHERE kind = ?"
        drops: dict[str, int] = {}
        for row in r.rows(overflow, [OVERFLOW_KIND], "read drops"):
            drops[row["collector"]] = drops.get(row["collector"], 0) + _count(row["error"])
    out = []
    for p in sorted(positions, key=lambda p: p["collector"]):
        batch = batches.get(p["collector"])
        last = utc(batch["last_commit"]) if batch is not None and batch["last_commit"] is not None else None
        out.append(
            {
                "collector": p["collector"],
                "position": int(p["position"]),
                "updated_at": iso(utc(p["updated_at"])),
                "batches": int(batch["batches"]) if batch is not None else 0,
                "events_new": int(batch["new"]) if batch is not None else 0,
                "duplicates": int(batch["duplicates"]) if batch is not None else 0,
                "last_commit": iso(last) if last is not None else None,
                "lag_seconds": round((now - last).total_seconds(), 3) if last is not None else None,
                "drops": drops.get(p["collector"], 0),
            }
        )
    return out


def written_since(source: Engine | Reader, collector: str, since: datetime) -> int:
    """Events `collector`'s batches committed at or after `since` inserted (duplicates not counted):
    what one proxy run wrote, for the line it says when it stops."""
    text = "SELECT coalesce(sum(new), 0) AS n FROM batches WHERE collector = ? AND committed_at >= ?"
    with reading(source) as r:
        rows = r.rows(text, [collector, sql.bind_time(r.dialect, since)], "count what a run wrote")
    return int(rows[0]["n"])


def _count(error: str | None) -> int:
    """The number an overflow event carries (its first whole number), 1 when it names none."""
    digits = "".join(ch if ch.isdigit() else " " for ch in error or "").split()
    return int(digits[0]) if digits else 1


__all__ = ["collectors", "durations", "state_answer", "tally", "tally_answer"]
