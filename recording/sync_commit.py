"""Committing one request event before it is forwarded (sync paths), on its own Ledger connection.

The deferred writer runs in its own process; a sync path cannot wait for it, so the proxy process
keeps this one small synchronous path. It writes under its own collector (`<collector>:sync`) so its
positions never interleave with the writer's batches.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from recording import events as ev
from recording.records import RequestRecord
from storage.events import Batch

if TYPE_CHECKING:
    from storage.ledger import Ledger


class SyncCommitter:
    """Appends single request events as their own batches; opened lazily, reopened after a failure."""

    def __init__(self, open_ledger: Callable[[float], Ledger], collector: str) -> None:
        self._open_ledger = open_ledger
        self.collector = f"{collector}:sync"
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        self._position: int | None = None

    def commit(self, rec: RequestRecord, processing: ev.Processing) -> None:
        """Commit the request event now; raises at once if the Ledger cannot take it."""
        with self._lock:
            if self._ledger is None:
                self._ledger = self._open_ledger(0.0)  # no retries: the sender is waiting
            ledger = self._ledger
            if self._position is None:
                self._position = ledger.position(self.collector) or 0
            position = self._position + 1
            event = ev.request_event(processing, rec, collector=self.collector, seq=position)
            try:
                ledger.append(Batch(collector=self.collector, position=position, events=(event,)))
            except Exception:
                self._close()
                raise
            self._position = position

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._ledger is not None:
            with contextlib.suppress(Exception):
                self._ledger.close()
        self._ledger = self._position = None
