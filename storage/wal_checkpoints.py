"""SQLite: the WAL copied back into the database file on a thread of its own, not in a commit.

SQLite checkpoints in the committing connection once the WAL holds `wal_autocheckpoint` pages
(1,000 by default): the commit that crosses it copies every page written since the last one into
the database file and syncs both files before it returns. On bench.ledger's event rows every third
commit took half as long again, and the overall rate fell a fifth below the median batch's.

A `Checkpointer` runs a PASSIVE checkpoint (it neither waits for nor blocks a reader or a writer)
on a connection of its own, once the commits it was told of wrote about `PAGES` WAL frames (SQLite's
own cadence, from `frames`: a checkpoint after every commit cost an agent-paced writer 44% more CPU,
bench.trickle at 5 requests a second), `GAP` seconds after the commit that crossed it; sqlite3
releases the interpreter lock while it copies, and the writer goes on with the next batch.
The writer's connections keep an in-line checkpoint as a backstop (`BACKSTOP_PAGES`): the WAL is
started over from its beginning only by a write that finds every frame of it copied, and while
commits come back to back a checkpoint on another connection always leaves the latest commit's
frames behind. The backstop's in-line checkpoint (run by the writer after its own commit, with
little left to copy) does not, so the WAL stays bounded however long the load lasts.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Any, Final

from storage.sqlite_setup import open_file

log = logging.getLogger("flightlog.storage")

GAP: Final = 0.25
"""Seconds from the commit that makes a checkpoint due to the checkpoint: the commits in between
share it (read when the thread waits)."""
PAGES: Final = 1000
"""WAL frames (by `frames`' estimate) after which a checkpoint is due: SQLite's default
`wal_autocheckpoint` (read when a commit is counted)."""
BACKSTOP_PAGES: Final = 8000
"""The writer's own `wal_autocheckpoint` while a `Checkpointer` runs beside it (32 MiB of 4 KiB
pages): reached only when commits leave the checkpointer no quiet moment (an import, a backlog
written at full speed), and then what it copies is mostly copied already."""
IDLE: Final = 30.0
"""Seconds without a commit after which the thread ends, closing its connection (read when it
waits): a Ledger dropped without `close` keeps no thread for long, and the next commit of one still
in use starts another."""
BACKSTOP_SET: Final = "flightlog_checkpoint_backstop"
"""The key a pooled connection's `info` carries once its backstop is set (`backstop`)."""


def frames(rows: int) -> int:
    """About how many WAL frames (pages) a commit of `rows` new events writes: every commit rewrites
    the last page of the table and of each of its dozen indexes, and more rows fill more. Measured
    on proxy-shaped events (time-ordered ids): 18-24 frames for 2 rows, 53 for 20, 95 for 120, 383
    for 1,000; this gives 22, 48, 108 and 440. It only sets the cadence: the backstop bounds the WAL."""
    return 20 + min(rows, 40) + 2 * rows // 5


def backstop(connection_info: dict[Any, Any], driver_connection: Any) -> None:
    """Set the in-line checkpoint of one of the writer's connections to `BACKSTOP_PAGES`, once
    per connection (`connection_info` is the pool's record of it, kept while it lives)."""
    if connection_info.get(BACKSTOP_SET):
        return
    driver_connection.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
    connection_info[BACKSTOP_SET] = True


class Checkpointer:
    """Checkpoints one SQLite database `GAP` seconds after the commits it is told of, on a daemon
    thread started when the first is due (and again in a forked child, where the parent's is not)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        """The process whose thread is running, 0 when none is."""
        self._owner = os.getpid()
        """The process the events and the lock were made in (a forked child makes its own)."""
        self._start_lock = threading.Lock()
        self._reported: str | None = None
        self._written = 0
        """WAL frames written since a checkpoint was last made due (`frames`' estimate)."""

    def committed(self, rows: int) -> None:
        """A write of `rows` new events committed: a checkpoint is due within `GAP` once about
        `PAGES` frames were written since the last one was."""
        self._written += frames(rows)
        if self._written < PAGES:
            return
        self._written = 0
        self._due.set()  # first: a thread deciding to end for idleness sees it and stays
        if self._pid != os.getpid():
            self._start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (a checkpoint under way finishes first); the database stays as it is,
        its WAL copied back by the next checkpoint or when its last connection closes."""
        self._stopping.set()
        self._due.set()
        thread = self._thread
        if thread is not None and self._owner == os.getpid():
            thread.join(timeout)

    def _start(self) -> None:
        if self._owner != os.getpid():  # a forked child: a parent's thread may have held these
            self._owner = os.getpid()
            self._start_lock = threading.Lock()
            self._due, self._stopping = threading.Event(), threading.Event()
            self._due.set()
        with self._start_lock:
            if self._pid == os.getpid() or self._stopping.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="flightlog-checkpoint", daemon=True)
            self._pid = os.getpid()
            self._thread.start()

    def _idle(self) -> bool:
        """Whether the thread should end: no commit came for `IDLE` seconds (decided under the
        start lock, so a commit either sees the thread gone and starts one, or is seen)."""
        if self._due.wait(IDLE):
            return False
        with self._start_lock:
            if self._due.is_set():
                return False
            self._pid = 0
            return True

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                if self._idle() or self._stopping.wait(GAP):
                    return
                self._due.clear()
                try:
                    if conn is None:
                        conn = open_file(self.database)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self._reported = None
                except sqlite3.Error as e:  # the backstop checkpoints meanwhile; try again next commit
                    said = f"{type(e).__name__}: {e}"
                    if said != self._reported:
                        log.warning("flightlog: checkpoint of %s failed (%s); retried after the next commit",
                                    self.database, said)  # fmt: skip
                        self._reported = said
                    if conn is not None:
                        conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()
