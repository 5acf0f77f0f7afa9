"""The Ledger's availability as the writer sees it: when it went down, when to try again.

Traffic never waits on the Ledger: while it is down the writer keeps what it was given (within its
bounds) and retries with a backoff that doubles up to `backoff_max`, saying one line when the
Ledger goes and one when it is back, never one per failed try.
"""

from __future__ import annotations

import logging
import time

from recording.writer.refusals import line

log = logging.getLogger("flightlog.capture")
FIRST_BACKOFF = 0.25


class Outage:
    """Down since when (None: up), the next retry, and the backoff to it."""

    def __init__(self, backoff_max: float) -> None:
        self.backoff_max = backoff_max
        self.since: float | None = None
        self.retry_at = 0.0
        self.backoff = FIRST_BACKOFF

    def waiting(self, now: float) -> bool:
        """Down, and the next retry is not due yet."""
        return self.since is not None and now < self.retry_at

    def until_retry(self) -> float:
        """Seconds to the next retry (0 when up or due)."""
        return 0.0 if self.since is None else max(0.0, self.retry_at - time.monotonic())

    def went_down(self, error: Exception) -> bool:
        """A write failed: True when the Ledger was up until now (said in one line; the caller
        lets its connection go), else the backoff doubles."""
        now = time.monotonic()
        first = self.since is None
        if first:
            self.since = now
            log.warning(
                "flightlog: ledger unavailable (%s: %s); traffic keeps flowing, retrying",
                type(error).__name__,
                line(error),
            )
        else:
            self.backoff = min(self.backoff * 2, self.backoff_max)
        self.retry_at = now + self.backoff
        return first

    def back(self) -> None:
        """A write went through: said once if the Ledger had been down."""
        if self.since is not None:
            log.warning(
                "flightlog: ledger is back after %.1f s; recording resumed", time.monotonic() - self.since
            )
            self.since = None
            self.backoff = FIRST_BACKOFF
