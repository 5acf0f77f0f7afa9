"""The writer handles records while a batch commits, and still commits and acknowledges in order.

A batch's commit is held up for real: another PostgreSQL session holds the collector's chain lock
(`storage.chain.lock`), so the writer's append waits inside its transaction, as it would behind a
slow server. Records put meanwhile must be handled (not left queued), go in the next batch, and be
acknowledged only once that batch is committed.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from addons.recording.acks import FrameAcks
from addons.recording.events import Processing
from addons.recording.writer import Writer
from storage.chain import _lock_key
from storage.ledger import open_ledger
from tests.capture.test_writer import count, request


def wait_for(check: object, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_records_are_handled_while_a_batch_commits_and_acked_only_once_committed(
    pg_url: str, tmp_path: Path
) -> None:
    """With the first batch's commit held, 50 more requests are handled into the next batch (the
    queue empties) and none of their frames is acknowledged; released, both batches commit at
    positions 1 and 2 and every frame is acknowledged."""
    blobs = (tmp_path / "blobs").as_uri()
    acked: list[int] = []
    writer = Writer(
        lambda retry: open_ledger(pg_url, blobs, retry_seconds=retry), Processing(), collector="t"
    )
    writer.acks = FrameAcks(acked.append)
    holder = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(%s)", (_lock_key("t"),))
        writer.start()
        writer.acks.open(1, 1)
        writer.put(request(0), 1)
        assert wait_for(lambda: writer._inflight is not None), "the first batch never started committing"
        for n in range(1, 51):
            writer.acks.open(n + 1, 1)
            writer.put(request(n), n + 1)
        assert wait_for(lambda: writer._queue.qsize() == 0 and len(writer._pending) == 50), (
            "records put while a batch commits were not handled"
        )
        assert acked == [] and writer._inflight is not None and not writer._inflight.done.is_set()
        holder.execute("SELECT pg_advisory_unlock(%s)", (_lock_key("t"),))
        assert wait_for(lambda: acked and acked[-1] == 51), acked
        writer.stop()
        ledger = open_ledger(pg_url, blobs)
        assert count(ledger) == 51 and ledger.position("t") == 2 == writer.stats.batches
        ledger.close()
    finally:
        holder.close()
        writer.stop()
