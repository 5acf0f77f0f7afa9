"""Publishing checkpoints: once by hand (`ledger checkpoint`), or by the writer at an interval and at stop.

The writer's publisher is a thread of its own beside the writer thread: a witness that is slow or
down never holds a batch's commit. It publishes when the Ledger's heads moved since its last
checkpoint, every `interval` seconds and once more at stop; a witness that fails gets one log line
and the next attempt (the tail it missed stays named as unwitnessed until then).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection

from storage.chain import registry
from storage.chain.signing import LedgerKeys, public_hex
from storage.errors import StorageError
from storage.ledger import Ledger
from storage.witness import checkpoint as cp
from storage.witness.stores import open_witness

log = logging.getLogger("flightlog.storage")


def checkpoint_of(ledger: Ledger, collector: str | None = None) -> cp.Checkpoint:
    """A checkpoint of `ledger`, signed by `collector`'s key when the Ledger registers it (the
    writer's), else by the root (`ledger checkpoint`, or a writer that has not written yet)."""
    keys = ledger.keys
    if not isinstance(keys, LedgerKeys):
        raise StorageError(
            "a checkpoint is signed with FLIGHTLOG_HOME's keys: this Ledger was opened without them"
        )
    root = keys.root()

    def make(conn: Connection) -> cp.Checkpoint:
        registered = registry.registrations(conn)
        signer = keys.signer(collector) if collector is not None and collector in registered else None
        if signer is not None and registered[signer.collector].public_key == signer.public:
            return cp.make(conn, signer, public_hex(root))
        return cp.make(conn, None, public_hex(root), sign_as_root=root)

    return ledger._read(make)


def publish(checkpoint: cp.Checkpoint, witnesses: Sequence[str]) -> list[str]:
    """Publish to every witness; where each copy went. Each witness is tried; the first failure is
    raised after the others were tried."""
    places, failed = [], None
    for url in witnesses:
        try:
            places.append(open_witness(url).publish(checkpoint))
        except StorageError as e:
            failed = failed or e
    if failed is not None:
        raise failed
    return places


class Publisher:
    """The writer's checkpoints: every `interval` seconds when the heads moved, and at `stop`."""

    def __init__(
        self,
        open_ledger: Callable[[], Ledger],
        witnesses: Sequence[str],
        collector: str,
        interval: float,
    ) -> None:
        self._open = open_ledger
        self.witnesses = tuple(witnesses)
        self.collector = collector
        self.interval = interval
        self.published = 0
        self._ledger: Ledger | None = None
        self._last: dict[str, object] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="flightlog-checkpoints", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Publish what the writer committed last, then end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.publish_if_moved()
        self.publish_if_moved()

    def publish_if_moved(self) -> None:
        """One checkpoint when the heads moved since the last one published."""
        try:
            if self._ledger is None:
                self._ledger = self._open()
            made = checkpoint_of(self._ledger, self.collector)
            if not made.body["heads"] or made.body["heads"] == self._last:
                return
            publish(made, self.witnesses)
        except StorageError as e:
            log.warning("flightlog: a checkpoint was not published: %s", str(e).splitlines()[0])
            return
        self._last = made.body["heads"]
        self.published += 1
