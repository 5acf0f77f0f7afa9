"""Whether anything under a Directory folder changed since the last ask, cheaply enough to ask per call.

A process that serves a Directory for long (the proxy's door and routes, `flightlog mcp`) must see
an edit of the folder before the next call it answers: a door running yesterday's contract, or a
token bound to a rewritten row still passing, is the hole this closes (`Directory.follow`).

On Linux the watch is inotify: the kernel queues an event inside the very system call that changed
a file, so one non-blocking `read` at the start of a call sees every change made before it (about a
microsecond when nothing changed; no thread, no polling). Every folder of the tree is watched, and a
folder created later is watched as soon as its creation is read. Where inotify cannot be had (another
system, or the watch limit reached) the watch compares the folder's stat tags instead: one `stat`
per file per ask (`catalog.folder.scan`), the cost the README states.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol

from catalog.folder import scan

_IN_MODIFY: Final = 0x2
_IN_ATTRIB: Final = 0x4
_IN_CLOSE_WRITE: Final = 0x8
_IN_MOVED_FROM: Final = 0x40
_IN_MOVED_TO: Final = 0x80
_IN_CREATE: Final = 0x100
_IN_DELETE: Final = 0x200
_IN_DELETE_SELF: Final = 0x400
_IN_MOVE_SELF: Final = 0x800
_IN_ISDIR: Final = 0x40000000
MASK: Final = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
    | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
)  # fmt: skip
_EVENT: Final = struct.Struct("iIII")
"""struct inotify_event: wd, mask, cookie, len (then `len` bytes of name)."""


class Watch(Protocol):
    def changed(self) -> bool:
        """True when something under the folder changed since the last call (the first: False)."""
        ...

    def close(self) -> None: ...


class InotifyWatch:
    """The folder tree under inotify (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._fd = fd
        self._dirs: dict[int, Path] = {}
        try:
            self._watch_tree(folder)
        except OSError:
            self.close()
            raise

    def _watch_tree(self, top: Path) -> None:
        for root, dirs, _ in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            wd = self._add(self._fd, os.fsencode(root), MASK)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {root}")
            self._dirs[wd] = Path(root)

    def changed(self) -> bool:
        seen = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return seen
            seen = True
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO) and wd in self._dirs:
                    self._watch_tree(self._dirs[wd] / os.fsdecode(name))  # a new folder: watched too

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class StatWatch:
    """The fallback: the folder's stat tags, compared with the last ask's."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._tags = self._now()

    def _now(self) -> dict[str, str]:
        return {bundle: found.stat_tag for bundle, found in scan(self.folder).items()}

    def changed(self) -> bool:
        tags = self._now()
        moved, self._tags = tags != self._tags, tags
        return moved

    def close(self) -> None:
        return None


def watch(folder: Path) -> Watch:
    """inotify where the system has it, else the stat tags."""
    try:
        return InotifyWatch(folder)
    except (OSError, AttributeError):  # no inotify here (AttributeError: libc lacks it), or no watch left
        return StatWatch(folder)


class Follower:
    """A Directory's folder, followed: `catch_up()` syncs it (`sync(folder, message=...)`) when the
    watch saw a change. One thread at a time: another that asks meanwhile waits for the sync, so no
    call made after an edit reads from before it; the sync's own reads re-enter without asking again."""

    def __init__(self, folder: Path, sync: Callable[..., Any]) -> None:
        self.folder = folder
        self._sync = sync
        self._watch = watch(folder)
        self._lock = threading.RLock()
        self._syncing = False

    def catch_up(self) -> None:
        with self._lock:
            if self._syncing or not self._watch.changed():
                return
            self._syncing = True
            try:
                self._sync(self.folder, message="sync from folder (followed)")
            finally:
                self._syncing = False

    def close(self) -> None:
        self._watch.close()
