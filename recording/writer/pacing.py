"""Backpressure: while the writer is behind, the proxy reads more slowly instead of dropping.

The writer process stops reading its pipe while its own queue is nearly full (`Writer.wait_for_room`),
so a writer behind shows on the proxy's side as bytes waiting for the pipe (`WriterProcess.backlog`).
Past `pause_at` of them, each connection that has just read waits before its next read (`room()`:
mitmproxy's read loop awaits it after each read, `addons.read_pacing`) until the pipe took enough to
bring them back under `resume_at`. (Not the frames awaiting acknowledgement: a stream's chunks are
acknowledged with its answer, at its end.) A paused read is a TCP window that fills: the
upstream sends more slowly, the client gets its bytes later, and a large streamed answer is stored
whole instead of `partial`. Each connection reads at most one more chunk (mitmproxy reads up to 64 KiB)
past the pause, so memory stays bounded near `pause_at` plus a chunk per connection.

Drops remain, past stated bounds only: a writer that makes no room for `PATIENCE` seconds (dead,
restarting for long, or the Ledger gone) lets the reads go on unpaced until it catches up again
(one log line says so), and then, as before, what passes the proxy's queue bound (`max_bytes` of
`WriterProcess`) is dropped, counted in a `capture.overflow` event and the stop line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from recording.answer_holds import resolve

log = logging.getLogger("flightlog.capture")

PATIENCE: Final = 20.0
"""The longest a read waits for the writer to make room; then reading goes on unpaced (and drops
past the queue bound) until the writer is back under `resume_at`."""


class Pacing:
    """When the proxy's reads must wait for the writer, and the waits in progress."""

    def __init__(
        self, unsettled: Callable[[], int], pause_at: int, resume_at: int, patience: float = PATIENCE
    ) -> None:
        self.unsettled = unsettled
        """The bytes waiting for the writer now."""
        self.pause_at = pause_at
        self.resume_at = resume_at
        self.patience = patience
        self.paused = 0
        """Reads that waited for the writer."""
        self.gave_up = 0
        """Times the writer made no room within `patience` (reads then went on unpaced)."""
        self._waiters: list[asyncio.Future[None]] = []
        self._unpaced = False

    def room(self) -> Awaitable[None] | None:
        """None when a read may go on now; else an awaitable that ends when the writer made room
        (or `patience` passed)."""
        level = self.unsettled()
        if self._unpaced:
            if level > self.resume_at:
                return None
            self._unpaced = False
            log.warning("flightlog: the writer caught up: reads wait for it again when it is behind")
        if level <= self.pause_at:
            return None
        return self._wait()

    async def _wait(self) -> None:
        self.paused += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.patience)
        except TimeoutError:
            if not self._unpaced:
                self._unpaced = True
                self.gave_up += 1
                log.warning(
                    "flightlog: the writer made no room for %g s: reads go on without waiting for it, and "
                    "what passes the queue bound is dropped (counted in capture.overflow)",
                    self.patience,
                )
            self.release()
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def settled(self) -> None:
        """The writer took bytes: wake the waiting reads once under `resume_at`."""
        if self._waiters and self.unsettled() <= self.resume_at:
            self.release()

    def release(self) -> None:
        """Wake every waiting read (room was made, the writer stops, or patience ran out)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            resolve(waiter)
