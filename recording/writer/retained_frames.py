"""Frames the proxy sent its writer process, kept until the writer says their records are settled.

A writer process killed with frames read and not committed would lose them; so the proxy keeps each
frame it wrote until the child acknowledges it (`ACK`: every frame up to a number), and hands what
is kept to a restarted child, in order (its re-delivery is idempotent: the same event ids). The copy
is bounded (`max_bytes`, counted in the frames' body bytes): past it the oldest frames are let go,
counted in `unprotected`, and their answers' exchange ids told (`on_let_go`: the risk journal), so
a writer dying now would lose them knowingly, never silently.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence


class RetainedFrames:
    """The frames sent and not yet acknowledged, oldest first."""

    def __init__(
        self, max_bytes: int, on_let_go: Callable[[Sequence[str]], object] = lambda ids: None
    ) -> None:
        self.max_bytes = max_bytes
        self.on_let_go = on_let_go
        self.unprotected = 0
        """Records let go unacknowledged because the kept frames passed `max_bytes` (they were sent;
        only a writer dying now would lose them)."""
        self._frames: deque[tuple[int, list[bytes], int, int, Sequence[str]]] = deque()
        """(number, pieces, body bytes, records, the exchange ids of their answers)."""
        self._bytes = 0

    def __bool__(self) -> bool:
        return bool(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def keep(self, number: int, pieces: list[bytes], size: int, records: int, answers: Sequence[str]) -> None:
        """Keep a frame just sent; past `max_bytes` of them the oldest go unkept (the bound holds
        whatever the writer's pace)."""
        self._frames.append((number, pieces, size, records, answers))
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._frames) > 1:
            _, _, old_size, old_records, old_answers = self._frames.popleft()
            self._bytes -= old_size
            self.unprotected += old_records
            self.on_let_go(old_answers)

    def settled(self, number: int) -> None:
        """The child acknowledged every frame up to `number`."""
        while self._frames and self._frames[0][0] <= number:
            self._bytes -= self._frames.popleft()[2]

    def pieces(self) -> Iterator[list[bytes]]:
        """What is kept, in order, to write again to a restarted child."""
        return (pieces for _, pieces, *_ in self._frames)

    @property
    def bytes(self) -> int:
        """The body bytes of the frames kept (sent, not yet acknowledged)."""
        return self._bytes

    @property
    def records(self) -> int:
        """Records sent and not (yet) acknowledged."""
        return sum(records for _, _, _, records, _ in self._frames)
