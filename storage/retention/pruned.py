"""What was pruned, as readers show it: a light module (the read path imports it without the
ORM; `storage.retention.prune` does the pruning)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from storage.reader import Reader, reading


@dataclass(frozen=True, slots=True)
class Pruned:
    """A pruned payload as readers show it."""

    sha256: str
    at: str
    reason: str
    event_id: str = ""

    def note(self) -> str:
        return f"pruned on {self.at[:10]} ({self.reason})"


def pruned(source: Reader | Any, shas: Collection[str]) -> dict[str, Pruned]:
    """Which of `shas` were pruned, when and why (for readers)."""
    found: dict[str, Pruned] = {}
    wanted = sorted({s.lower() for s in shas if s})
    with reading(source) as r:
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows = r.rows(
                "SELECT sha256, pruned_at, reason, event_id FROM pruned"
                f" WHERE sha256 IN ({', '.join('?' for _ in chunk)})",
                chunk,
                "read what was pruned",
            )
            found.update(
                (row["sha256"], Pruned(row["sha256"], row["pruned_at"], row["reason"], row["event_id"]))
                for row in rows
            )
    return found
