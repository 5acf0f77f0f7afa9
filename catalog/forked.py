"""One call run in a forked child while the parent goes on: the sections a first open compiles on
other cores (`catalog.compile_jobs`).

A fork copies only the calling thread, so a lock another thread held stays held in the child for
good: nothing is forked unless the process runs one thread (`single_threaded`). The child runs its
call, writes the pickled result to its pipe once it has it (a full pipe then holds only its exit,
never its work) and leaves with `os._exit`: it never flushes the parent's buffered stdout (the MCP
channel), runs no exit handler and touches none of the parent's database connections.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import Any

Waiting = Callable[[], Any]
"""Waits for the child's result: None when it failed, could not start, or was never started."""


def single_threaded() -> bool:
    """Whether this process runs one thread: no other of Python's, and none a library started
    natively (a watchdog, a driver's I/O thread), which `threading` does not count."""
    if threading.active_count() > 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: Python's own threads are all that can be counted
        return True


def in_child(call: Callable[..., Any], *args: Any) -> Waiting:
    """Run `call(*args)` in a forked child; call the result to wait for what it returned. Where a
    fork is not safe (another thread, no fork) or fails, nothing runs and the result gives None:
    the caller does the work itself."""
    if not hasattr(os, "fork") or not single_threaded():
        return lambda: None
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return lambda: None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_end)
            result = call(*args)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(result, out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)

    def wait() -> Any:
        try:
            with os.fdopen(read_end, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
            return pickle.loads(data) if status == 0 and data else None
        except (OSError, pickle.UnpicklingError, EOFError, ValueError):
            return None

    return wait
