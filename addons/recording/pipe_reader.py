"""The writer process's end of the pipe, read by looking every few milliseconds instead of waiting.

The proxy writes each answer's records into the pipe before the answer goes out (`WriterProcess.
answered`), so it writes far more often than every 5 ms. A write that finds a reader asleep on the
pipe wakes it, and the waking is paid by the writer: measured on the 2-core bench machine, ~20 us of
the proxy's CPU per write against ~2 us into a pipe nobody waits on. So while records keep coming,
this side does not wait on the pipe: it reads what is there, and when nothing is, sleeps `POLL`
and looks again (the records are safe in the kernel meanwhile; the writer batches for 50 ms anyway).
After `IDLE` of nothing it waits on the pipe again, so an idle writer costs no wake-ups.
"""

from __future__ import annotations

import io
import os
import select
import time

POLL = 0.003
"""Seconds between looks while records come: a 1 MiB pipe holds ~300 ms of 1 KiB answers at
1,000 a second, and a 100 KiB answer's frames are taken in a few looks."""
IDLE = 0.2
"""After this long with nothing in the pipe, wait on it (woken by the next write) instead of looking."""


class PollingPipe(io.RawIOBase):
    """A raw, blocking-looking reader of a non-blocking pipe: `readinto` returns once bytes are
    there (0 at end of file), having slept rather than waited while the writer was busy."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        os.set_blocking(fd, False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        idle_since = time.monotonic()
        while True:
            try:
                return os.readv(self.fd, [buffer])
            except BlockingIOError:
                pass
            if time.monotonic() - idle_since < IDLE:
                time.sleep(POLL)
            else:
                select.select([self.fd], [], [])


def polling_stdin(buffer_size: int = 1024 * 1024) -> io.BufferedReader:
    """The process's stdin as a buffered reader over a `PollingPipe`."""
    return io.BufferedReader(PollingPipe(0), buffer_size=buffer_size)
