"""append(batch): one transaction, idempotent re-delivery, conflicts reported, bad rows refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.append import batch_id
from storage.errors import InvalidEvent
from storage.ledger import open_ledger
from tests.storage.factory import batch, event


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri(), retry_seconds=2)
    yield opened
    opened.close()


def count(ledger, table: str) -> int:  # type: ignore[no-untyped-def]
    with ledger.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_batch_commits_events_blobs_accounting_and_position(ledger) -> None:  # type: ignore[no-untyped-def]
    """Every event, its distinct payloads once, one batch row and the collector's position."""
    events = [event(i, payload=b'{"n": %d}' % (i % 3)) for i in range(10)]
    result = ledger.append(batch(events, position=7))
    assert (result.received, result.new, result.duplicates, result.conflicts) == (10, 10, 0, ())
    assert count(ledger, "events") == 10
    assert count(ledger, "blobs") == 3, "identical payloads are stored once"
    assert count(ledger, "batches") == 1
    assert ledger.position("test") == 7


def test_delivering_the_same_batch_twice_adds_nothing(ledger) -> None:  # type: ignore[no-untyped-def]
    """A re-delivery reports 0 new and leaves the tables as they were."""
    events = [event(i) for i in range(6)]
    ledger.append(batch(events))
    again = ledger.append(batch(events))
    assert (again.new, again.duplicates, again.conflicts) == (0, 6, ())
    assert count(ledger, "events") == 6
    assert count(ledger, "batches") == 1


def test_overlapping_batches_add_only_what_is_new(ledger) -> None:  # type: ignore[no-untyped-def]
    """Two batches sharing half their events: the second adds only its new half."""
    ledger.append(batch([event(i) for i in range(0, 8)], position=1))
    second = ledger.append(batch([event(i) for i in range(4, 12)], position=2))
    assert (second.new, second.duplicates) == (4, 4)
    assert count(ledger, "events") == 12
    assert ledger.position("test") == 2


def test_an_older_position_never_moves_the_collector_back(ledger) -> None:  # type: ignore[no-untyped-def]
    """A late re-delivery of an old batch keeps the newest delivered position."""
    ledger.append(batch([event(2)], position=5))
    ledger.append(batch([event(1)], position=3))
    assert ledger.position("test") == 5


def test_a_re_delivery_numbered_anew_is_a_duplicate_not_a_conflict(ledger) -> None:  # type: ignore[no-untyped-def]
    """A writer process restarted by the proxy gets the unacknowledged frames again and numbers their
    events from 1 (another `seq`) in a batch at another position: the same events, so duplicates,
    and the batch row lists no conflict."""
    first = [event(i) for i in range(4)]
    ledger.append(batch(first, position=1))
    again = [replace(e, seq=e.seq + 100) for e in first] + [event(4)]
    result = ledger.append(batch(again, position=2))
    assert (result.new, result.duplicates, result.conflicts) == (1, 4, ())
    with ledger.engine.connect() as conn:
        recorded = conn.execute(text("SELECT conflicts FROM batches WHERE position = 2")).scalar_one()
    assert recorded == "[]"
    assert ledger.event("ev-000001").seq == 1, "the first delivery's row is the one kept"


def test_same_id_with_other_content_is_a_conflict_not_a_silent_drop(ledger) -> None:  # type: ignore[no-untyped-def]
    """The stored version is kept, and the offered one is reported with both fingerprints."""
    original = event(1, payload=b"first")
    ledger.append(batch([original, event(2)]))
    changed = replace(original, payload=b"second")
    result = ledger.append(batch([changed, event(3)], position=2))
    assert result.new == 1
    assert [c.event_id for c in result.conflicts] == ["ev-000001"]
    conflict = result.conflicts[0]
    assert conflict.stored_fingerprint != conflict.offered_fingerprint
    stored = ledger.event("ev-000001")
    assert ledger.payload(stored.payload_sha256) == b"first"
    with ledger.engine.connect() as conn:
        recorded = conn.execute(text("SELECT conflicts FROM batches WHERE position = 2")).scalar_one()
    assert "ev-000001" in recorded


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"direction": "sideways"}, "direction"),
        ({"payload_state": "complete", "payload": None}, "needs a payload"),
        ({"payload_state": "missing", "payload": b"x"}, "cannot carry a payload"),
        ({"payload_state": "exploded"}, "payload_state"),
        ({"url": "http://x/\x00"}, "NUL"),
        ({"status": -1}, "status"),
    ],
)
def test_one_invalid_event_rolls_back_the_whole_batch_and_names_it(ledger, bad, says) -> None:  # type: ignore[no-untyped-def]
    """Nothing of a batch with one bad event is written; the error names the event and the reason."""
    events = [event(i) for i in range(5)]
    events[3] = replace(events[3], **bad)
    with pytest.raises(InvalidEvent) as info:
        ledger.append(batch(events))
    assert "ev-000003" in str(info.value) and says in str(info.value)
    assert count(ledger, "events") == 0
    assert count(ledger, "blobs") == 0
    assert count(ledger, "batches") == 0


def test_a_row_the_database_refuses_rolls_back_everything(ledger) -> None:  # type: ignore[no-untyped-def]
    """A constraint violation inside the transaction (here a NULL in a NOT NULL column) undoes it all."""
    from storage.errors import StorageError

    events = [event(i) for i in range(4)]
    events[2] = replace(events[2], head=None)  # type: ignore[arg-type]
    with pytest.raises(StorageError):
        ledger.append(batch(events))
    assert count(ledger, "events") == 0


def test_reads_give_back_every_field(ledger) -> None:  # type: ignore[no-untyped-def]
    """event() and action() return what was appended, exactly, including head bytes and redactions."""
    request = event(0, redacted=("OPENAI_KEY",), tokens_in=12, model="gpt-4o", cost_usd=0.25)
    response = event(1, payload=b"\xff\xfe binary", tokens_out=7)
    missing = event(2, payload=None, state="missing", action="act-000000")
    ledger.append(batch([request, response, missing]))
    got = ledger.event("ev-000000")
    assert got.head == request.head
    assert got.redacted == ("OPENAI_KEY",)
    assert (got.model, got.tokens_in, got.cost_usd) == ("gpt-4o", 12, 0.25)
    assert got.at == request.at
    assert got.payload_text is True
    assert ledger.event("ev-000001").payload_text is False
    assert [e.event_id for e in ledger.action("act-000000")] == ["ev-000000", "ev-000001", "ev-000002"]
    assert ledger.event("ev-000002").payload_sha256 is None
    assert ledger.event("nope") is None


def test_a_batch_id_is_the_same_in_every_version() -> None:
    """A batch re-delivered after an upgrade must get the id it got before (the batch rows and the
    chain's headers hold it): SHA-256 over the collector, its position and the sorted event ids,
    each behind a NUL, whatever the ids' order in the batch or their script."""
    ids = ["evt-b", "évt-a", "evt-c"]
    events = [replace(event(i), event_id=e, collector="agent-1") for i, e in enumerate(ids)]
    same = batch(events, position=7, collector="agent-1")
    shuffled = batch(events[::-1], position=7, collector="agent-1")
    assert batch_id(same) == batch_id(shuffled) == "28af595ef3365358475aff622fe1dda6"
    assert batch_id(batch(events, position=8, collector="agent-1")) != batch_id(same)
