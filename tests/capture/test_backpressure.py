"""Backpressure: a writer that falls behind slows the upstream's reads instead of dropping chunks,
so a large streamed answer is stored whole (`recording.writer.pacing`, `addons.read_pacing`)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx

from tests.capture.ledger_view import events_where, ledger_of
from tests.capture.test_kill_writer import writer_pid
from tests.support.big_stream import big_stream, expected_sha256
from tests.support.proxy import live_proxy

SIZE = 96 * 1024 * 1024
"""Three times the proxy's queue bound: without backpressure a stopped writer cuts it `partial`."""


def _until_still(count: list[int], done: threading.Event, quiet: float = 2.0, limit: float = 120.0) -> int:
    """What the client holds once it stops getting more (or has it all): a wait, not an assertion."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + limit
    while not done.is_set() and time.monotonic() < deadline:
        if count[0] != last:
            last, since = count[0], time.monotonic()
        elif time.monotonic() - since > quiet:
            break
        time.sleep(0.05)
    return count[0]


def test_a_writer_behind_slows_a_large_stream_and_stores_it_whole(home: Path, tmp_path: Path) -> None:
    """The writer stopped (SIGSTOP) while a 96 MiB answer streams: the client stalls short of the
    end and the upstream has not sent it all (its reads were held back); once the writer goes on,
    the client gets every byte and the Ledger holds the answer `complete`, same size and hash, with
    no `capture.overflow` event; the stop line says the reads waited, and that nothing was lost."""
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    got = [0]
    done = threading.Event()
    with big_stream() as up, live_proxy(home, ledger_url) as proxy:
        writer = writer_pid(proxy.proc.pid)
        assert writer is not None
        os.kill(writer, signal.SIGSTOP)

        def fetch() -> None:
            try:
                client = httpx.Client(proxy=proxy.url, trust_env=False, timeout=120)
                with client, client.stream("GET", f"{up.base}/{SIZE}") as answer:
                    for chunk in answer.iter_raw(1024 * 1024):
                        got[0] += len(chunk)
            finally:
                done.set()

        reader = threading.Thread(target=fetch)
        reader.start()
        try:
            held = _until_still(got, done)
            sent = up.sent
        finally:
            os.kill(writer, signal.SIGCONT)
        reader.join(timeout=300)
        assert held < SIZE and sent < SIZE, "the upstream was read on while the writer was stopped"
        assert got[0] == SIZE and up.done == 1
    (stopped,) = [line for line in proxy.log().splitlines() if line.startswith("flightlog proxy: stopped")]
    assert "times for the writer to catch up" in stopped and stopped.endswith("nothing lost"), stopped
    ledger = ledger_of(ledger_url, (home / "blobs").as_uri())
    try:
        (answer,) = events_where(ledger, "kind = 'http.response'", {})
        assert answer.payload_state == "complete", answer.error
        assert answer.payload_size == SIZE and answer.payload_sha256 == expected_sha256(SIZE)
        assert events_where(ledger, "kind = 'capture.overflow'", {}) == []
    finally:
        ledger.close()


def test_pacing_waits_for_room_and_gives_up_past_its_patience() -> None:
    """Reads wait past `pause_at` until the writer is back under `resume_at` (not before); a writer
    that makes no room within `patience` lets the reads go on unpaced (counted in `gave_up`) until
    it is under `resume_at` again, and then they wait again."""
    import asyncio

    from recording.writer.pacing import Pacing

    async def main() -> None:
        level = [0]
        pacing = Pacing(lambda: level[0], pause_at=10, resume_at=5, patience=0.2)
        assert pacing.room() is None
        level[0] = 11
        wait = pacing.room()
        assert wait is not None
        task = asyncio.ensure_future(wait)
        await asyncio.sleep(0)
        level[0] = 6
        pacing.settled()
        await asyncio.sleep(0)
        assert not task.done(), "over resume_at: the read still waits"
        level[0] = 5
        pacing.settled()
        await asyncio.wait_for(task, 5)
        assert pacing.paused == 1 and pacing.gave_up == 0
        level[0] = 11
        stuck = pacing.room()
        assert stuck is not None
        await stuck  # nothing settles: patience runs out
        assert pacing.gave_up == 1
        assert pacing.room() is None, "a writer that made no room: reads go on unpaced"
        level[0] = 5
        assert pacing.room() is None
        level[0] = 11
        again = pacing.room()
        assert again is not None, "caught up once: reads wait for it again"
        pending = asyncio.ensure_future(again)
        await asyncio.sleep(0)
        pacing.release()  # what a stopping writer does: no read is left waiting
        await asyncio.wait_for(pending, 5)

    asyncio.run(main())


def test_the_writer_process_stops_reading_frames_while_its_queue_is_nearly_full(tmp_path: Path) -> None:
    """The writer's queue three quarters full (its Ledger not open yet): `wait_for_room` holds the
    frame reader (so the pipe fills and the proxy reads slower) instead of `put` dropping; once
    the Ledger opens, it goes on and every record is written, none dropped."""
    from recording.events import Processing
    from recording.writer.thread import Writer
    from storage.ledger import open_ledger
    from tests.capture.test_writer_process import count, response, urls

    url, blobs = urls(tmp_path)
    gate = threading.Event()

    def opened_later(retry: float):  # type: ignore[no-untyped-def]
        gate.wait(60)
        return open_ledger(url, blobs, retry_seconds=retry)

    writer = Writer(opened_later, Processing(), collector="room", max_bytes=1024 * 1024)
    writer.start()
    body = b"x" * 64 * 1024
    for n in range(12):  # three quarters of the bound
        assert writer.put(response(n, body))
    reader = threading.Thread(
        target=lambda: (writer.wait_for_room(len(body)), writer.put(response(12, body)))
    )
    reader.start()
    reader.join(1.0)
    still = reader.is_alive()
    gate.set()
    reader.join(60)
    writer.stop(timeout=30)
    assert still, "the frame reader went on while the queue was nearly full"
    assert writer.stats.dropped == 0
    ledger = open_ledger(url, blobs)
    try:
        assert count(ledger) == 13
    finally:
        ledger.close()
