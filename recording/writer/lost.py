"""Answered exchanges a dead proxy could not record: found from its risk journal, filed as one event.

The writer process settles a journal (`risk_journal`) left by a run that died: the ids it holds whose
answer is not in the Ledger were answered and never recorded. They are filed as one `capture.lost`
event (the count in `error`, the ids as its payload, one a line) under an id naming the collector and
the run, so settling the same journal twice is the same write; and said in one log line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from recording.events import when
from recording.writer.risk_journal import SUFFIX, left_behind, read_ids
from storage import kinds
from storage.events import Event
from storage.ledger import Ledger, open_ledger

log = logging.getLogger("flightlog.capture")


def unrecorded(ledger: Ledger, ids: Sequence[str]) -> list[str]:
    """The exchange ids, of `ids`, whose answer event the Ledger does not hold."""
    found = {e.event_id for e in ledger.events([kinds.event_id(i, kinds.RESPONSE_ROLE) for i in ids])}
    return [i for i in ids if kinds.event_id(i, kinds.RESPONSE_ROLE) not in found]


def lost_event(collector: str, run: str, ids: Sequence[str], at: float) -> Event:
    """The record that the exchanges `ids` of `collector`'s run `run` were answered, never recorded."""
    event_id = f"lost:{collector}:{run}"
    return Event(
        event_id=event_id,
        action_id=event_id,
        kind=kinds.CAPTURE_LOST,
        direction="out",
        at=when(at),
        collector=collector,
        payload="".join(f"{i}\n" for i in ids).encode(),
        payload_state="complete",
        error=(
            f"{len(ids)} answered exchanges were not recorded: the proxy stopped (killed) before their "
            "records were safe with its writer (their ids are this event's payload)"
        ),
    )


def settle(
    journal: Path, collector: str, ledger_url: str, blobs_url: str, put: Callable[[Event], object]
) -> int:
    """Check one journal against the Ledger and `put` its lost exchanges' event; how many were lost.
    The journal is deleted once settled (kept when the Ledger cannot be read now)."""
    ids = read_ids(journal)
    run = journal.name[: -len(SUFFIX)].rpartition(".")[2]
    missing: list[str] = []
    if ids:
        try:
            ledger = open_ledger(ledger_url, blobs_url, retry_seconds=0)
            try:
                missing = unrecorded(ledger, ids)
            finally:
                ledger.close()
        except Exception as e:  # the Ledger is down: the journal waits for the next writer
            log.warning("flightlog: cannot check a dead run's journal now (%s); kept for later", e)
            return 0
    if missing:
        put(lost_event(collector, run, missing, time.time()))
        log.warning(
            "flightlog: %d answered exchanges of an earlier run (%s) were not recorded: the proxy was "
            "killed before their records were safe (filed as a capture.lost event)",
            len(missing),
            run,
        )
    journal.unlink(missing_ok=True)
    return len(missing)


def settle_left_behind(
    folder: Path,
    collector: str,
    own_run: str,
    ledger_url: str,
    blobs_url: str,
    put: Callable[[Event], object],
) -> int:
    """Settle every journal of `collector`'s dead runs; how many exchanges they had lost."""
    with left_behind(folder, collector, own_run) as journals:
        return sum(settle(path, collector, ledger_url, blobs_url, put) for path in journals)
