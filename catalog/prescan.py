"""A folder's stat tags, taken by a forked child while the parent goes on starting up.

Checking a Directory folder is one stat per file (a file edited in place changes its own mtime
only, never its folder's), about as long at 25,000 rows as the rest of opening it. `flightlog mcp`
meanwhile imports the MCP SDK; in one process both hold the one GIL and add up, so the check runs
in a child on the other core and hands back each bundle's stat tag. The parent, once its store is
open, compares them with the tags it stored: all equal, and nothing of the folder is read; any
difference, or no answer at all, and the Directory syncs as it always does, scanning again itself.
A skipped check can therefore never serve stale rows: it only skips when a full scan said so.
(`flightlog find`, which has no such import to overlap, scans in-process: forking cost it more.)
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

Prescanned = Callable[[], dict[str, str] | None]
"""Waits for the child's tags (None when it could not give them)."""


def single_threaded() -> bool:
    """Whether this process runs one thread: no other of Python's, and none a library started
    natively (a watchdog, a driver's I/O thread), which `threading` does not count. A fork copies
    only the calling thread, so a lock another thread held stays held in the child for good."""
    if threading.active_count() > 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: Python's own threads are all that can be counted
        return True


def prescan(folder: Path) -> Prescanned:
    """Start scanning `folder` in a forked child; call the result for its stat tags by bundle.

    Only from a process with no other thread (the command line's; the SDK's preload starts after),
    so no lock the child needs can be held by a thread it did not inherit. The child only scans,
    writes to its pipe and leaves with `os._exit`, so it never flushes the parent's buffered stdout
    (the MCP channel) nor runs its exit handlers.
    """
    if not hasattr(os, "fork") or not single_threaded():
        return lambda: None  # a thread could hold a lock the child needs: the open scans itself
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return lambda: None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_end)
            from catalog.folder import scan  # imported here: the parent imports it meanwhile

            tags = {bundle: found.stat_tag for bundle, found in scan(folder).items()}
            with os.fdopen(write_end, "wb") as out:
                out.write(json.dumps(tags).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)

    def result() -> dict[str, str] | None:
        try:
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            tags = json.loads(data) if status == 0 and data else None
        except (OSError, ValueError):
            return None
        return tags if isinstance(tags, dict) else None

    return result
