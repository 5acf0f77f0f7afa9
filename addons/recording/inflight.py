"""One batch committing off the writer thread, so records keep being handled while it commits.

The writer thread used to wait out every append: on PostgreSQL a dozen round trips and the commit's
WAL flush, each needing the server's process to be scheduled on a busy machine. Meanwhile records
queued unhandled, and the next batch began only after they were redacted, hashed and compressed
(bench.capture: answer -> committed p99 314-481 ms against SQLite's 163-184). Now the append runs on
a short-lived thread of its own (database waits release the GIL) while the writer thread prepares
the next batch; at most one batch is in flight, so batches still commit in position order, one at a
time, and each is acknowledged only once its append returned.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from addons.recording.stream_body import Deferred
from storage.events import Batch, Event
from storage.ledger import Ledger


@dataclass
class InFlight:
    """A batch being appended, and what the writer needs to settle it or take it back."""

    ledger: Ledger
    items: list[Event | Deferred]
    """The pending records it was made of (given back in front of the next batch on an outage)."""
    frames: list[int | None]
    size: int
    since: float
    events: list[Event]
    dropped: int
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    committed: float = 0.0
    """Wall time the append returned (the answer -> committed delay ends here, not at settling)."""


def name_os_thread(name: bytes) -> None:
    """Name the OS thread (Linux), so `top -H` and the bench can tell the writer and its commits
    from the event loop."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(15, name[:15], 0, 0, 0)  # PR_SET_NAME


def materialize(ledger: Ledger, item: Event | Deferred) -> Event:
    """The event itself, or a large streamed answer's with its spooled body stored (`PayloadRef`)."""
    if isinstance(item, Event):
        return item
    spool = ledger.spool()
    item.body.file.seek(0)
    while chunk := item.body.file.read(1024 * 1024):
        spool.write(chunk)
    return replace(item.event, payload=spool.close())


def start(job: InFlight, batch: Batch, on_done: Callable[[], None] = lambda: None) -> InFlight:
    """Append `batch` on a daemon thread (a killed process loses only what is not committed)."""

    def run() -> None:
        name_os_thread(b"flightlog-commit")
        try:
            job.ledger.append(batch)
            job.committed = time.time()
        except BaseException as e:  # handed to the writer thread, which decides
            job.error = e
        finally:
            job.done.set()
            on_done()

    threading.Thread(target=run, name="flightlog-commit", daemon=True).start()
    return job
