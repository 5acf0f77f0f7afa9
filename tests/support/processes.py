"""No process outlives its test: children started in a process group of their own, stopped as a group,
and the suite's end-of-run look for any that got away.

A server that starts helpers of its own (textual-serve starts one `flightlog browse` per page, a proxy
its writer and workers) leaves them running, reparented to pid 1, when only the server is stopped;
killing the group stops them all. `leftovers()` finds what a test run left behind: processes whose
environment carries the run's marker (every child inherits it from the test process) and that are no
longer children of a live test process, or descendants of a process that is finishing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MARKER = "FLIGHTLOG_TEST_RUN"
"""The environment variable naming a test run (its scratch folder); children inherit it."""


def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen` in a new session (its own process group), so `stop_group` reaches its helpers."""
    return subprocess.Popen(list(argv), start_new_session=True, **kwargs)


def stop_group(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM to the process's group, SIGKILL to what is left after `grace` seconds, then reap it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # the leader is gone; its helpers may not be
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        return
    proc.wait()


@contextmanager
def group(argv: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen[Any]]:
    """`spawn` for a block: the whole group is stopped when it ends, however it ends."""
    proc = spawn(argv, **kwargs)
    try:
        yield proc
    finally:
        stop_group(proc)


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def command(pid: int) -> str:
    """The process's command line, for a report."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below `root`."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat and stat[1] != "Z":
            children.setdefault(stat[0], []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def orphans(run: str) -> list[int]:
    """Live processes of the test run `run` (the marker's value) whose parent is gone (pid 1, or a
    subreaper that is no process of the run)."""
    mark = f"{MARKER}={run}".encode()
    found = []
    for pid in _pids():
        if pid == os.getpid() or mark not in _environ(pid).split(b"\0"):
            continue
        stat = _stat(pid)
        if stat is None or stat[1] == "Z":
            continue
        if mark not in _environ(stat[0]).split(b"\0"):
            found.append(pid)
    return found


def settle(find: Any, seconds: float = 5.0) -> list[int]:
    """What `find()` still answers after up to `seconds` (processes being stopped as the run ends get
    that long to go)."""
    deadline = time.monotonic() + seconds
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(left)


def kill(pids: list[int]) -> None:
    """SIGKILL each (a leftover: reported, then not left running)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
