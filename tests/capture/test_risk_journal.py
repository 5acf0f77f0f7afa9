"""A dead run's risk journal is settled against the Ledger: what it answered and the Ledger lacks is
filed as one `capture.lost` event; a journal whose writer still lives (its lock held) is left alone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from recording.writer.lost import settle_left_behind
from recording.writer.risk_journal import RiskJournal, hold, journal_path, read_ids
from storage import kinds
from storage.events import Batch, Event
from storage.ledger import open_ledger


def test_a_dead_runs_journal_names_what_the_ledger_lacks(tmp_path: Path) -> None:
    """Three exchanges written down by a dead run, one of them recorded: the other two are one
    `capture.lost` event (count and ids); the journal is gone; a live run's journal (locked) and this
    writer's own are not touched; settling twice files nothing more."""
    db, blobs = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    folder = tmp_path / "journal"
    dead = RiskJournal(journal_path(folder, "c#1", "dead"))
    dead.note(["a", "b"])
    dead.note(["c", "a"])
    dead.close(settled=False)
    assert read_ids(dead.path) == ["a", "b", "c"]
    live = journal_path(folder, "c#1", "live")
    lock = hold(live)
    assert lock is not None
    RiskJournal(live).note(["x"])
    ledger = open_ledger(db, blobs)
    answered = Event(
        event_id=kinds.event_id("b", kinds.RESPONSE_ROLE), action_id="b", kind=kinds.HTTP_RESPONSE,
        direction="out", at=datetime.now(UTC), collector="c#1",
    )  # fmt: skip
    ledger.append(Batch("c#1", 1, (answered,)))
    ledger.close()
    filed: list[Event] = []
    assert settle_left_behind(folder, "c#1", "mine", db, blobs, filed.append) == 2
    assert len(filed) == 1 and filed[0].kind == kinds.CAPTURE_LOST
    assert filed[0].payload == b"a\nc\n" and (filed[0].error or "").startswith("2 answered exchanges")
    assert filed[0].event_id == "lost:c#1:dead"
    assert not dead.path.exists() and live.exists()
    assert settle_left_behind(folder, "c#1", "mine", db, blobs, filed.append) == 0
    os.close(lock)
    assert settle_left_behind(folder, "c#1", "mine", db, blobs, filed.append) == 1  # its writer is gone now
