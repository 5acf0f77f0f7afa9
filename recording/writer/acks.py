"""Which of the proxy's frames are durable: every record in them committed (or counted as lost).

The proxy keeps each frame it sent until the writer process acknowledges it, and sends what is not
acknowledged again to a restarted writer (event ids make the second delivery a no-op). A frame is
acknowledged once each of its records is settled: its event committed, filed as unrecordable, or
dropped at the writer's bound and counted in a `capture.overflow` event. The proxy's own drops that a
frame reports settle as one more item of it, with the overflow event recording them. A stream's chunks settle
with its answer event. Acknowledgements are a contiguous prefix: the highest frame number such that
it and every frame before it are settled, so one number says it all.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable


class FrameAcks:
    """Counts unsettled records per frame (the reader thread opens, the writer thread settles)."""

    def __init__(self, on_ack: Callable[[int], None]) -> None:
        self._on_ack = on_ack
        self._lock = threading.Lock()
        self._open: dict[int, int] = {}
        self._order: deque[int] = deque()

    def open(self, frame: int, count: int) -> None:
        """A frame of `count` records arrived (before any of them is handed to the writer)."""
        with self._lock:
            self._open[frame] = self._open.get(frame, 0) + count
            self._order.append(frame)
            self._advance()

    def settle(self, frames: Iterable[int | None]) -> None:
        """One record of each frame named is settled (None: a record that came in no frame)."""
        with self._lock:
            for frame in frames:
                if frame is not None and frame in self._open:
                    self._open[frame] -= 1
            self._advance()

    def _advance(self) -> None:
        last = None
        while self._order and self._open.get(self._order[0], 0) <= 0:
            last = self._order.popleft()
            self._open.pop(last, None)
        if last is not None:
            self._on_ack(last)
