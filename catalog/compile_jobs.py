"""Several sections compiled at once, on as many cores as the process may use.

Compiling a section is pure CPU (parse every document, cut it into words) and one section never
reads another, so a first open of a large folder, where every section is compiled, can spread them
over forked children: each compiles its share and hands back the compiled data through a pipe.
Compiling took over a third of a 25,000-row folder's first `flightlog find` on one core.

Forking is only done where it is safe and pays: a process with no other thread, Python's or a
library's (`catalog.forked`; the MCP server and the HTTP door have threads and compile in turn),
more than one core given by the caller, at least two sections and `FORK_MIN` documents in all. A child that
fails or answers short is not trusted: its sections are compiled here, in turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from catalog.forked import in_child, single_threaded
from catalog.section_compile import compile_section

FORK_MIN: Final = 2000
"""Documents from which the sections are compiled in children (a fork and a child's start have
their cost: below this they do not pay)."""

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


def can_fork(jobs: Sequence[Job], cores: int) -> bool:
    """Whether compiling `jobs` in children is safe here and worth it on `cores` cores."""
    return (
        cores > 1
        and len(jobs) > 1
        and sum(len(documents) for _, documents in jobs) >= FORK_MIN
        and single_threaded()
    )


def compile_all(jobs: Sequence[Job], cores: int = 1) -> tuple[dict[str, Compiled], int]:
    """Each job's compiled data and warnings by bundle, on up to `cores` processes (the caller
    knows what the process may use: `flightlog.cores`), and how many children compiled some."""
    if not can_fork(jobs, cores):
        return _compile(jobs), 0
    mine, *theirs = shares(jobs, min(cores, len(jobs)))
    children = [in_child(_compile, share) for share in theirs]
    done = _compile(mine)
    forked = 0
    for share, wait in zip(theirs, children, strict=True):
        got = wait()
        if isinstance(got, dict) and set(got) == {bundle for bundle, _ in share}:
            done.update(got)
            forked += 1
        else:  # the child failed: compile its share here
            done.update(_compile(share))
    return done, forked


def _compile(jobs: Sequence[Job]) -> dict[str, Compiled]:
    return {bundle: compile_section(bundle, documents) for bundle, documents in jobs}
