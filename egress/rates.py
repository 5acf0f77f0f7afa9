"""Request rates: at most N calls per sliding window, per agent (session, task), in this process.

Counted in memory, where the proxy sees each call: a window is the times of the calls it let
through, oldest dropped as they age out. With `--workers N` each worker counts its own share (a
caller spread over N workers may make up to N times the rate); a refused call does not count.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from egress.limits import Rate, key_of
from egress.rules import Call, Decision


class RateBook:
    """The recent calls of each (rate, caller)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._seen: dict[tuple[str, str | None], deque[float]] = {}

    def take(self, rate: Rate, call: Call) -> Decision | None:
        """Count `call` if the window has room; else a refusal naming the rate (nothing counted)."""
        who = key_of(call, rate.per)
        window = self._seen.setdefault((rate.name, who), deque())
        now = self.clock()
        horizon = now - rate.window.total_seconds()
        while window and window[0] <= horizon:
            window.popleft()
        if len(window) >= rate.requests:
            retry = window[0] - horizon
            return Decision(
                "deny",
                rate.name,
                f"{rate.describe(who)}: {len(window)} in the last {rate.window.total_seconds():g} s",
                details={"retry_after_s": round(retry, 3)},
            )
        window.append(now)
        return None
