"""`ledger du`: what the Ledger's payloads hold, by age, host, agent or kind, and what a retention
policy would free.

Sizes are the payloads' own (`size`) and what storing them costs (`stored_size`: zstd, inline or in
the blob store). Identical bytes are stored once: a payload shared by events of two hosts is counted
under each host, once in the totals. A payload's age is its newest event's (it is needed until
then). Pruned payloads are counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from storage.event_sql import bind_time
from storage.reader import Reader
from storage.retention.policy import Policy, due_payloads

BY: Final = ("age", "host", "agent", "kind")
AGES: Final = (
    (1, "under a day"),
    (7, "1-7 days"),
    (30, "7-30 days"),
    (90, "30-90 days"),
    (365, "90-365 days"),
)
OLDEST: Final = "over a year"
NOT_PRUNED: Final = "NOT EXISTS (SELECT 1 FROM pruned p WHERE p.sha256 = b.sha256)"


@dataclass(frozen=True, slots=True)
class Usage:
    """Payloads of one group: how many, their bytes, what storing them costs."""

    key: str | None
    payloads: int
    size: int
    stored: int

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "payloads": self.payloads, "bytes": self.size, "stored_bytes": self.stored}


def _usage(row: dict[str, Any], key: Any = None) -> Usage:
    return Usage(key, int(row["n"] or 0), int(row["size"] or 0), int(row["stored"] or 0))


def totals(reader: Reader) -> tuple[Usage, Usage]:
    """(the payloads held, the payloads pruned)."""
    held = reader.rows(
        "SELECT count(*) AS n, SUM(size) AS size, SUM(stored_size) AS stored FROM blobs b"
        f" WHERE {NOT_PRUNED}",
        (),
        "count the payloads",
    )[0]
    pruned = reader.rows(
        "SELECT count(*) AS n, SUM(b.size) AS size, SUM(b.stored_size) AS stored FROM blobs b"
        " JOIN pruned p ON p.sha256 = b.sha256",
        (),
        "count the pruned payloads",
    )[0]
    return _usage(held, "held"), _usage(pruned, "pruned")


def by(reader: Reader, key: str, now: datetime) -> list[Usage]:
    """The payloads held, grouped by `key` (one of `BY`), largest stored first (ages in age order)."""
    if key not in BY:
        raise ValueError(f"du --by {key}: one of {', '.join(BY)}")
    params: list[Any] = []
    if key == "age":
        whens = []
        for days, label in AGES:
            whens.append("WHEN newest >= ? THEN ?")
            params += [bind_time(reader.dialect, now - timedelta(days=days)), label]
        group = (
            "SELECT CASE "
            + " ".join(whens)
            + " ELSE ? END AS k, b.sha256, b.size, b.stored_size FROM blobs b"
            " JOIN (SELECT payload_sha256 AS sha, MAX(at) AS newest FROM events"
            " WHERE payload_sha256 IS NOT NULL GROUP BY payload_sha256) e ON e.sha = b.sha256"
            f" WHERE {NOT_PRUNED}"
        )
        params.append(OLDEST)
    else:
        group = (
            f"SELECT DISTINCT e.{key} AS k, b.sha256, b.size, b.stored_size FROM events e"
            f" JOIN blobs b ON b.sha256 = e.payload_sha256 WHERE {NOT_PRUNED}"
        )
    rows = reader.rows(
        f"SELECT k, count(*) AS n, SUM(size) AS size, SUM(stored_size) AS stored FROM ({group}) g GROUP BY k",
        params,
        f"count the payloads by {key}",
    )
    found = [_usage(r, r["k"]) for r in rows]
    if key == "age":
        order = [label for _, label in AGES] + [OLDEST]
        return sorted(found, key=lambda u: order.index(str(u.key)))
    return sorted(found, key=lambda u: (-u.stored, str(u.key)))


def would_free(reader: Reader, policy: Policy, now: datetime) -> Usage:
    """What pruning by `policy` now would remove."""
    due = due_payloads(reader, policy, now)
    return Usage(
        policy.describe(),
        len(due),
        sum(int(r["size"]) for r in due),
        sum(int(r["stored_size"]) for r in due),
    )
