"""The writer process's end of the pipe: looked at every few milliseconds while writes come fast,
waited on otherwise.

The proxy writes each answer's records into the pipe before the answer goes out (`WriterProcess.
answered`), so it writes far more often than the looks below. A write that finds a reader asleep on
the pipe wakes it, and the waking is paid by the writer: a write into a pipe someone waits on costs
the proxy several times the CPU of one into a pipe nobody waits on. So while records keep coming,
this side does not wait on the pipe: it reads what is there, and when nothing is, sleeps and looks
again (the records are safe in the kernel meanwhile; the writer batches for longer anyway). Once
the looks find nothing it waits on the pipe again (below), so an idle writer costs no wake-ups.

A look is not free either: each sleep and wake-up costs the writer CPU, so looking at the shortest
interval cost as much whenever records came at all, one request a second as much as a thousand. The
interval between looks therefore follows what the looks find (`next_interval`): it grows while
little arrives between two looks, up to `POLL_MAX`, and shrinks to `POLL` as soon as a look finds a
sizeable share of the pipe, so the pipe never fills while the reader sleeps (a full pipe would hold
answers back in the proxy).

Looking only pays while writes come faster than the looks: at an agent's pace (a request or two a
second, each a request and an answer frame) the looks between two requests found nothing, and cost
the writer more CPU than its commits. So the reader waits on the pipe whenever a look at the longest
interval finds nothing (fewer writes than one per `POLL_MAX`), and looks again only once the writes
that wake it come closer together than `POLL_GAP` on average (`should_look`). Between the two the
mode stays, so a rate near the break-even does not flip it at every write.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import sys
import time
from collections import deque
from collections.abc import Sequence

POLL = 0.003
"""The shortest interval between looks: a 1 MiB pipe holds a few of these intervals' worth of 100 KiB
answers at 1,000 a second, and such answers' frames are taken in a few looks."""
POLL_MAX = 0.025
"""The longest interval between looks while records come: what it adds to the answer->commit delay."""
POLL_GAP = 0.015
"""Mean seconds between the last `WAKES` wake-ups below which a waiting reader starts looking again.
A wake-up costs the writer the same whether a look or a write made it, and a write into a pipe someone
waits on costs the proxy more: looking every `POLL_MAX` pays from a few dozen writes a second.
Waiting stops above this rate, looking below the looks' own rate (`POLL_MAX`): the mode holds between."""
WAKES = 4
"""Wake-ups whose spacing `should_look` averages (a request and its answer come as two close writes)."""
DEFAULT_CAPACITY = 64 * 1024
"""A pipe's size when the kernel does not say (Linux's default)."""


def next_interval(interval: float, found: int, capacity: int) -> float:
    """The sleep before the next look, given what the looks since the last sleep found.

    More than an eighth of the pipe in one interval: back to `POLL` (a burst may fill the rest
    before a longer sleep ends). Less than a thirty-second: half as long again, up to `POLL_MAX`.
    In between the interval stays, so a steady stream settles where a look finds a few percent of
    the pipe.
    """
    if found > capacity // 8:
        return POLL
    if found < capacity // 32:
        return min(interval * 1.5, POLL_MAX)
    return interval


def should_look(wakes: Sequence[float]) -> bool:
    """Whether a reader woken by writes at these monotonic times should look instead of wait: the
    last `WAKES` came less than `POLL_GAP` apart on average."""
    return len(wakes) >= WAKES and (wakes[-1] - wakes[-WAKES]) / (WAKES - 1) < POLL_GAP


def pipe_capacity(fd: int) -> int:
    """The pipe's size in bytes (Linux F_GETPIPE_SZ), else `DEFAULT_CAPACITY`."""
    if sys.platform == "linux":
        import fcntl

        with contextlib.suppress(OSError):
            return int(fcntl.fcntl(fd, 1032))  # F_GETPIPE_SZ
    return DEFAULT_CAPACITY


class PollingPipe(io.RawIOBase):
    """A raw, blocking-looking reader of a non-blocking pipe: `readinto` returns once bytes are
    there (0 at end of file), having slept rather than waited while the writer was busy."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.interval = POLL
        """The current sleep between looks (`next_interval`)."""
        self._found = 0
        self._capacity = 0
        """The pipe's size, asked once something came: the proxy sets it before its first write."""
        self.looking = False
        """Looking every `interval` (writes come fast), or waiting on the pipe (`should_look`)."""
        self._wakes: deque[float] = deque(maxlen=WAKES)
        os.set_blocking(fd, False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            try:
                read = os.readv(self.fd, [buffer])
            except BlockingIOError:
                pass
            else:
                self._found += read
                return read
            # The pipe is empty: everything that came since the last sleep has been read.
            if self._found and not self._capacity:
                self._capacity = pipe_capacity(self.fd)
            if self.looking and not self._found and self.interval >= POLL_MAX:
                self.looking = False  # fewer writes than looks: each look costs more than a wake-up
            self.interval = next_interval(self.interval, self._found, self._capacity or DEFAULT_CAPACITY)
            self._found = 0
            if self.looking:
                time.sleep(self.interval)
            else:
                select.select([self.fd], [], [])
                self._wakes.append(time.monotonic())
                self.looking = should_look(self._wakes)
                self.interval = POLL  # the first records after a quiet spell: look soon again


def polling_stdin(buffer_size: int = 1024 * 1024) -> io.BufferedReader:
    """The process's stdin as a buffered reader over a `PollingPipe`."""
    return io.BufferedReader(PollingPipe(0), buffer_size=buffer_size)
