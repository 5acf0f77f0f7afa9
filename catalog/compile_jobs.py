"""Several sections compiled at once, on as many cores as the process may use.

Compiling a section is pure CPU (parse every document, cut it into words) and one section never
reads another, so a first open of a large folder, where every section is compiled, can spread them
over forked children: each compiles its share and hands back the compiled data through a pipe. A
25,000-row folder's five sections took ~2.8 s of a ~7.7 s first `flightlog find` on one core.

Forking is only done where it is safe and pays: a process with no other thread, Python's or a
library's (`catalog.prescan.single_threaded`: a thread could hold a lock the child needs; the MCP
server and the HTTP door have threads and compile in turn),
more than one usable core, at least two sections and `FORK_MIN` documents in all. A child that
fails or answers short is not trusted: its sections are compiled here, in turn.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Final

from catalog.index import compile_section
from catalog.prescan import single_threaded

FORK_MIN: Final = 2000
"""Documents from which the sections are compiled in children (a fork and a child's start cost
~20-40 ms: below this they do not pay)."""

Job = tuple[str, Sequence[tuple[str, str, str]]]
"""A section to compile: its bundle and its `(path, hash, text)` documents."""
Compiled = tuple[bytes, list[str]]


def shares(jobs: Sequence[Job], parts: int) -> list[list[Job]]:
    """`jobs` dealt into `parts` shares of about as many documents each (largest first, each to the
    share holding the fewest so far); empty shares dropped."""
    out: list[list[Job]] = [[] for _ in range(max(parts, 1))]
    sizes = [0] * len(out)
    for job in sorted(jobs, key=lambda j: (-len(j[1]), j[0])):
        k = sizes.index(min(sizes))
        out[k].append(job)
        sizes[k] += len(job[1])
    return [share for share in out if share]


def usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def can_fork(jobs: Sequence[Job]) -> bool:
    """Whether compiling `jobs` in children is safe here and worth it."""
    return (
        hasattr(os, "fork")
        and single_threaded()
        and len(jobs) > 1
        and sum(len(documents) for _, documents in jobs) >= FORK_MIN
        and usable_cores() > 1
    )


def compile_all(jobs: Sequence[Job]) -> tuple[dict[str, Compiled], int]:
    """Each job's compiled data and warnings by bundle, and how many children compiled some."""
    if not can_fork(jobs):
        return {bundle: compile_section(bundle, documents) for bundle, documents in jobs}, 0
    mine, *theirs = shares(jobs, min(usable_cores(), len(jobs)))
    children = [_fork(share) for share in theirs]
    done = {bundle: compile_section(bundle, documents) for bundle, documents in mine}
    forked = 0
    for share, child in zip(theirs, children, strict=True):
        got = _collect(child)
        if got is not None and set(got) == {bundle for bundle, _ in share}:
            done.update(got)
            forked += 1
        else:  # the child failed: compile its share here
            done.update({bundle: compile_section(bundle, documents) for bundle, documents in share})
    return done, forked


Child = tuple[int, int] | None
"""A child's pid and the read end of its pipe; None when it could not be started."""


def _fork(share: Sequence[Job]) -> Child:
    """Start a child compiling `share`. It writes its results once all are compiled (so a full
    pipe only holds its exit, never its work) and leaves with `os._exit`: no exit handler, no
    flush of the parent's buffers, no database connection of the parent's touched."""
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_end)
            done = {bundle: compile_section(bundle, documents) for bundle, documents in share}
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(done, out, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _collect(child: Child) -> dict[str, Compiled] | None:
    """A child's results, once it has exited; None when it failed or wrote something else."""
    if child is None:
        return None
    pid, read_end = child
    try:
        with os.fdopen(read_end, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        got = pickle.loads(data) if status == 0 and data else None
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        return None
    return got if isinstance(got, dict) else None
