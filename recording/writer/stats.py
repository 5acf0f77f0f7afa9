"""What the writer counts (for its log lines, the tests and the bench's stats file), and the proxy's
reports of the items it dropped before they reached the writer."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


@dataclass
class WriterStats:
    """Counters for logs, tests and the bench."""

    written: int = 0
    dropped: int = 0
    proxy_dropped: int = 0
    """Reported by the proxy (dropped at its bound, recorded each in its own overflow event)."""
    rejected: int = 0
    unrecordable: int = 0
    batches: int = 0
    delays: array[float] = field(default_factory=lambda: array("d"))
    """Answer -> commit seconds of each answer written, kept only for a stats file (the bench):
    at most `DELAYS_KEPT` (8 bytes each), never in a writer nobody asks them of."""


DELAYS_KEPT = 1_000_000


@dataclass(frozen=True, slots=True)
class ProxyDrops:
    """Items the proxy dropped at its own bound, as one of its frames reported them (`run`: which
    proxy process; `at`: when it reported them). Settled by the overflow event that records them."""

    run: str
    frame: int
    count: int
    at: float
