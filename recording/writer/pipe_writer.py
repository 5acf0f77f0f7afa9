"""Frames to a non-blocking pipe from the event loop, with no copy of what must wait.

asyncio's pipe transport keeps what the pipe cannot take yet in one bytearray: each frame is
copied into it, and each partial write deletes from its front, moving everything behind it. With
100 KiB answers and a writer process descheduled for a few milliseconds, that backlog is megabytes
and the memmoves land on the event loop. Here a frame the pipe cannot take whole waits as a
memoryview in a deque; a partial write slices the first view; nothing is copied or moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections import deque
from collections.abc import Callable

IOV_MAX = 1024
"""Pieces handed to one writev at most (Linux's limit)."""
PIPE_SIZE = 1024 * 1024
"""Asked of the kernel (Linux F_SETPIPE_SZ): fewer wake-ups than the 64 KiB default."""


class PipeWriter:
    """The write end of a pipe, owned by one event loop. `buffered` is what waits on this side;
    `sent` counts every byte the kernel took, so `sent + buffered` after a write marks where that
    write ends (it is in the kernel once `sent` reaches the mark). `on_sent` is called after the
    queue shrank, or when the pipe broke or closed (then nothing more will be sent)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self.loop = loop
        self.fd = fd
        self.buffered = 0
        self.sent = 0
        self.broken = False
        self.on_sent: Callable[[], None] | None = None
        self._queue: deque[memoryview] = deque()
        self._watching = False
        self._closing = False
        os.set_blocking(fd, False)
        if sys.platform == "linux":
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, 1031, PIPE_SIZE)  # F_SETPIPE_SZ

    @property
    def closed(self) -> bool:
        return self._closing or self.broken

    def write(self, *pieces: bytes | memoryview) -> None:
        """Write now what the pipe takes (one `writev`); queue the rest (never blocks)."""
        if self.closed:
            return
        views = [memoryview(piece).cast("B") for piece in pieces if len(piece)]
        if not self._queue:
            written = self._writev(views)
            if written is None:
                return
            self.sent += written
            views = _skip(views, written)
            if not views:
                return
        self._queue.extend(views)
        self.buffered += sum(len(view) for view in views)
        if not self._watching:
            self.loop.add_writer(self.fd, self._drain)
            self._watching = True

    def close(self) -> None:
        """Close once everything queued is written (the reader then sees end of file)."""
        self._closing = True
        if not self._queue:
            self._close_now()

    def _writev(self, views: list[memoryview]) -> int | None:
        try:
            return os.writev(self.fd, views[:IOV_MAX])
        except BlockingIOError:
            return 0
        except OSError:  # the reader is gone (EPIPE): what waits is lost, the owner notices the exit
            self.broken = True
            self._queue.clear()
            self.buffered = 0
            self._close_now()
            return None

    def _drain(self) -> None:
        while self._queue:
            written = self._writev(list(itertools.islice(self._queue, IOV_MAX)))
            if not written:  # full (0) or broken (None): wait for the next writable event, or stop
                return
            self.buffered -= written
            self.sent += written
            while written:
                first = self._queue[0]
                if written < len(first):
                    self._queue[0] = first[written:]
                    if self.on_sent is not None:
                        self.on_sent()
                    return  # the pipe took part of it: it is full now
                written -= len(first)
                self._queue.popleft()
        if self.on_sent is not None:
            self.on_sent()
        if self._watching:
            self.loop.remove_writer(self.fd)
            self._watching = False
        if self._closing:
            self._close_now()

    def _close_now(self) -> None:
        if self._watching:
            self.loop.remove_writer(self.fd)
            self._watching = False
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
        if self.on_sent is not None:
            self.on_sent()


def _skip(views: list[memoryview], count: int) -> list[memoryview]:
    """`views` without their first `count` bytes (a partial write's remainder)."""
    rest = []
    for view in views:
        if count >= len(view):
            count -= len(view)
            continue
        rest.append(view[count:])
        count = 0
    return rest
