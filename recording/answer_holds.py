"""Answers held until their records are in the writer's kernel pipe, within a bound.

`WriterProcess.answered()` writes an answer's records before the answer goes to its client. Most
of the time the pipe takes them at once. When it is full (the writer process behind, or stopped),
what does not fit waits on this side in the `PipeWriter`, and a proxy killed now would lose it: so
the answer is held until the pipe has taken it, but only while little waits here and only for a
while. Past `HOLD_BYTES` or `HOLD_SECONDS`, or with no writer running at all (being restarted), the
answer goes unheld and is counted in `unprotected`: traffic is never stalled by the recorder, and
what was left unprotected is known.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence

from recording.writer.pipe_writer import PipeWriter

HOLD_BYTES = 4 * 1024 * 1024
"""An answer whose records wait on this side of a full pipe is held until they are in the kernel,
but not when more than this waits here: then the writer is far behind and holding answers would
stall traffic. It goes to its client at once and is counted in `unprotected`."""
HOLD_SECONDS = 0.2
"""The longest an answer is held for its records to reach the kernel pipe (then released, counted)."""


def resolve(future: asyncio.Future[None], _: object = None) -> None:
    """Resolve `future` unless it already is (usable as a done callback)."""
    if not future.done():
        future.set_result(None)


class AnswerHolds:
    """The answers waiting for a pipe to take what was written before them, oldest first."""

    def __init__(self, on_unprotected: Callable[[Sequence[str]], object] = lambda ids: None) -> None:
        self.unprotected = 0
        """Answers that went to their clients before their records were in the kernel pipe."""
        self.on_unprotected = on_unprotected
        """Told the exchange ids of each answer let go unprotected (`risk_journal` writes them down)."""
        self._held: deque[tuple[PipeWriter, int, asyncio.Future[None], Sequence[str]]] = deque()
        """(pipe, its `sent` mark that covers the answers' records, the future their hooks await,
        the exchange ids of the answers awaiting it)."""

    def hold(
        self, loop: asyncio.AbstractEventLoop, pipe: PipeWriter | None, unsent: bool, answers: Sequence[str]
    ) -> asyncio.Future[None] | None:
        """A future resolved once what was written to `pipe` so far is in the kernel; None when it
        is, or when it cannot be waited for (the `answers`, exchange ids, counted and told).
        `unsent`: records not written anywhere yet (no writer to write them to)."""
        if pipe is None or pipe.closed:
            if unsent:
                self._unprotected(answers)
            return None
        if not pipe.buffered:
            return None
        if pipe.buffered > HOLD_BYTES:
            self._unprotected(answers)
            return None
        held = loop.create_future()
        entry = (pipe, pipe.sent + pipe.buffered, held, answers)
        self._held.append(entry)
        loop.call_later(HOLD_SECONDS, self._give_up, held, answers)
        return held

    def _unprotected(self, answers: Sequence[str]) -> None:
        self.unprotected += len(answers)
        self.on_unprotected(answers)

    def release(self, pipe: PipeWriter) -> None:
        """`pipe` took more (or broke, or closed): release the answers whose records it has, and
        every answer held on it once nothing more will reach the kernel through it."""
        while self._held:
            held_on, mark, held, answers = self._held[0]
            ended = held_on.fd < 0
            if (held_on is not pipe or held_on.sent < mark) and not ended:
                return
            self._held.popleft()
            if not held.done():
                if held_on.sent < mark:
                    self._unprotected(answers)
                held.set_result(None)

    def _give_up(self, held: asyncio.Future[None], answers: Sequence[str]) -> None:
        if not held.done():
            self._unprotected(answers)
            held.set_result(None)
