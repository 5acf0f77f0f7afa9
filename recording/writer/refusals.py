"""What the writer does when the Ledger will not take a batch: an outage waits, anything else is
about the records, which are then written one by one (so one bad record never holds up the rest).
"""

from __future__ import annotations

import logging
from typing import Protocol

from recording import events as ev
from storage.events import Batch, Event
from storage.ledger import Ledger

log = logging.getLogger("flightlog.capture")


class Counters(Protocol):
    """The writer's counters this module adds to."""

    rejected: int
    unrecordable: int


def outage(error: BaseException) -> bool:
    """Whether the Ledger could not take anything now (unreachable, locked, disk full): keep the
    batch and retry. Everything else (a refused record, a bug) is about the records: they are
    written one by one and the ones that fail are filed as `capture.unrecordable`."""
    from storage.errors import BlobStoreUnavailable, DiskFull, LedgerUnavailable

    # An OSError is the machine's (a refused connect while opening, a full disk under the blobs).
    return isinstance(error, LedgerUnavailable | BlobStoreUnavailable | DiskFull | OSError)


def line(error: Exception) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:200]


def one_by_one(
    ledger: Ledger, collector: str, position: int, events: list[Event], error: Exception, stats: Counters
) -> tuple[list[Event], int]:
    """Write `events` one batch each after their batch failed with `error` (not an outage): every
    event the Ledger takes is kept; each one it refuses is filed in its place as a
    `capture.unrecordable` event carrying its bytes and the error, with one log line; only if even
    that is refused is it counted as rejected. An outage on the way is raised (the caller retries
    what is left, idempotently). Returns what was written and the position before the caller's own.
    """
    log.warning("flightlog: ledger refused a batch (%s); writing its events one by one", line(error))
    kept = []
    for event in events:
        position += 1
        try:
            ledger.append(Batch(collector=collector, position=position, events=(event,)))
        except Exception as e:
            if outage(e):
                raise
            log.warning("flightlog: event %s refused by the ledger: %s", event.event_id, line(e))
            filed = ev.unrecordable_event(event, e)
            try:
                ledger.append(Batch(collector=collector, position=position, events=(filed,)))
            except Exception as again:
                if outage(again):
                    raise
                stats.rejected += 1
                log.warning("flightlog: not even its record was taken: %s", line(again))
                continue
            stats.unrecordable += 1
            event = filed
        kept.append(event)
    return kept, position - 1
