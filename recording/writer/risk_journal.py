"""Exchanges answered before their records were safe, written down until they are: what a killed
proxy could not record is counted and said, never lost in silence.

The proxy holds an answer until its records are in the writer's kernel pipe, which outlives a
`kill -9` of the proxy (`answer_holds`), but only within a bound: past it, or while no writer runs,
the answer goes out first. Those exchanges' ids are appended to the run's journal
(`FLIGHTLOG_HOME/journal/COLLECTOR.RUN.risk`) as they go out: a few bytes, on that rare path only.
So are the records of a frame let go unacknowledged (past the proxy's copy bound). A clean stop,
every frame acknowledged, deletes the journal.

A journal left behind belongs to a run that died. The writer that drained that run's pipe (reaching
its end of file without being told to stop), or, when that writer died too, the next writer of the
same collector (the dead one's lock on the journal is free), checks each id against the Ledger and
files the ones it does not hold as one `capture.lost` event, with one log line. `ledger verify`
counts them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import quote

SUFFIX = ".risk"


def journal_path(folder: Path, collector: str, run: str) -> Path:
    return folder / f"{quote(collector, safe='')}.{run}{SUFFIX}"


class RiskJournal:
    """The proxy's side: appends ids, deletes the file once nothing in it is at risk any more."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self.noted = 0

    def note(self, ids: Iterable[str]) -> None:
        """Write `ids` down (a failure to is logged by the caller's counters, never raised)."""
        text = "".join(f"{i}\n" for i in ids)
        if not text:
            return
        try:
            if self._fd < 0:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, text.encode())
            self.noted += text.count("\n")
        except OSError:
            pass

    def close(self, settled: bool) -> None:
        """Close; with `settled` (every frame acknowledged) the journal is deleted."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if settled:
            with contextlib.suppress(OSError):
                self.path.unlink()


def hold(path: Path) -> int | None:
    """The writer's lock on its run's journal (created empty if need be): a fd to keep open while
    the writer lives, or None when it cannot be taken."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def left_behind(folder: Path, collector: str, own_run: str) -> Iterator[list[Path]]:
    """The journals of `collector`'s other runs whose writer is gone (their lock free), locked for
    the block: each is read, reconciled, then deleted by the caller."""
    prefix = f"{quote(collector, safe='')}."
    held: list[tuple[Path, int]] = []
    try:
        for path in sorted(folder.glob(f"{prefix}*{SUFFIX}")) if folder.is_dir() else []:
            run = path.name[len(prefix) : -len(SUFFIX)]
            if run == own_run or "." in run:
                continue
            fd = hold(path)
            if fd is not None:
                held.append((path, fd))
        yield [path for path, _ in held]
    finally:
        for _, fd in held:
            os.close(fd)


def read_ids(path: Path) -> list[str]:
    """The ids a journal holds, once each, in order."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(line.strip() for line in lines if line.strip()))
