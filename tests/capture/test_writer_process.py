"""The writer process behind a pipe: everything put lands, a dead proxy loses nothing it handed over,
Ctrl-C does not cut the drain short, a crashed writer is restarted, and the bound drops and counts.

Each test drives the real `WriterProcess` (a real child `python -m recording.writer.child`) against a
real Ledger; the proxy-killed case runs the parent side in a subprocess so it can be SIGKILLed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from recording.events import Processing
from recording.identity import Identity
from recording.records import Exchange, RequestRecord, ResponseRecord, StreamChunk
from recording.writer.process import RESTART_MAX, WriterProcess, WriterSpec, restart_delay
from storage.ledger import Ledger, open_ledger

ROOT = Path(__file__).resolve().parents[2]


def exchange(n: int) -> Exchange:
    return Exchange(f"flow-{n}", "out", "POST", f"http://h/{n}", "h", Identity(agent="w", turn=str(n)))


def request(n: int, body: bytes = b"") -> RequestRecord:
    return RequestRecord(exchange(n), time.time(), b"POST /%d HTTP/1.1\r\nHost: h\r\n\r\n" % n, body)


def response(n: int, body: bytes = b"ok") -> ResponseRecord:
    return ResponseRecord(exchange(n), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", body)


def count(ledger: Ledger, where: str = "1 = 1") -> int:
    with ledger.engine.connect() as c:
        return int(c.execute(text(f"SELECT count(*) FROM events WHERE {where}")).scalar() or 0)


def urls(tmp_path: Path) -> tuple[str, str]:
    return f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()


def make(ledger_url: str, blobs: str, **spec: object) -> WriterProcess:
    return WriterProcess(
        WriterSpec(ledger_url=ledger_url, blobs_url=blobs, collector="wp", **spec),  # type: ignore[arg-type]
        Processing(),
        lambda retry: open_ledger(ledger_url, blobs, retry_seconds=retry),
    )


def wait_for(ledger_url: str, blobs: str, where: str, expected: int, timeout: float = 20) -> int:
    """Poll the Ledger until `expected` rows match (the writer commits on its own schedule)."""
    deadline = time.monotonic() + timeout
    found = -1
    while time.monotonic() < deadline:
        ledger = open_ledger(ledger_url, blobs)
        try:
            found = count(ledger, where)
        except Exception:
            found = -1  # the child has not created the tables yet
        finally:
            ledger.close()
        if found >= expected:
            return found
        time.sleep(0.2)
    return found


def test_everything_put_lands_and_the_counters_are_left_behind(ledger_url: str, tmp_path: Path) -> None:
    """Requests, answers (one over the inline limit) and a streamed answer, on SQLite and PostgreSQL,
    with identity and exact bodies; the child writes its counters to the stats file at exit."""
    blobs = (tmp_path / "blobs").as_uri()
    stats = tmp_path / "stats.json"
    big = os.urandom(300 * 1024)

    async def main() -> None:
        writer = make(ledger_url, blobs, stats_file=str(stats))
        await writer.start()
        for n in range(200):
            assert writer.put(request(n, b'{"n": %d}' % n))
            assert writer.put(response(n, big if n == 7 else b"answer %d" % n))
        writer.put(request(999))
        for part in (b"data: 1\n\n", b"data: 2\n\n"):
            writer.put(StreamChunk("flow-999", part))
        writer.put(
            ResponseRecord(exchange(999), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", None, streamed=True)
        )
        await writer.stop(timeout=10)

    asyncio.run(main())
    ledger = open_ledger(ledger_url, blobs)
    try:
        assert count(ledger) == 402
        event = ledger.event("flow-7:response")
        assert event is not None and ledger.payload(event.payload_sha256 or "") == big
        request_event = ledger.event("flow-42:request")
        assert request_event is not None and request_event.agent == "w" and request_event.turn == "42"
        streamed = ledger.event("flow-999:response")
        assert streamed is not None
        assert ledger.payload(streamed.payload_sha256 or "") == b"data: 1\n\ndata: 2\n\n"
    finally:
        ledger.close()
    assert json.loads(stats.read_text())["written"] == 402


PARENT = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    sys.path.insert(0, {root!r})
    from tests.capture.test_writer_process import make, request, response

    async def main():
        writer = make({url!r}, {blobs!r})
        await writer.start()
        for n in range(500):
            writer.put(request(n))
            writer.put(response(n))
        await asyncio.sleep(0.05)  # the frames are on the pipe
        print(writer._proc.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # the proxy dies without stopping anything

    asyncio.run(main())
    """
)


def test_a_proxy_killed_outright_loses_nothing_it_handed_over(tmp_path: Path) -> None:
    """SIGKILL on the proxy: the writer sees the pipe end, drains what it was given, and exits."""
    url, blobs = urls(tmp_path)
    script = PARENT.format(root=str(ROOT), url=url, blobs=blobs)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    child = int(done.stdout.split()[0])
    assert wait_for(url, blobs, "1 = 1", 1000) == 1000
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        if Path(f"/proc/{child}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            break  # exited; a zombie until init reaps it
        time.sleep(0.1)
    status = Path(f"/proc/{child}/stat")
    assert not status.exists() or status.read_text().split(") ", 1)[1].startswith("Z"), "the writer exited"


def test_ctrl_c_reaching_the_writer_does_not_cut_its_drain_short(tmp_path: Path) -> None:
    """A terminal's SIGINT goes to the whole process group; the writer ignores it and keeps writing."""
    url, blobs = urls(tmp_path)

    async def main() -> None:
        writer = make(url, blobs)
        await writer.start()
        assert writer._proc is not None
        await asyncio.sleep(0.3)
        os.kill(writer._proc.pid, signal.SIGINT)
        os.kill(writer._proc.pid, signal.SIGTERM)
        for n in range(100):
            writer.put(request(n))
        await asyncio.sleep(0.3)
        assert writer._proc.returncode is None, "SIGINT/SIGTERM did not stop the writer"
        await writer.stop(timeout=10)
        assert writer._proc.returncode == 0

    asyncio.run(main())
    assert wait_for(url, blobs, "1 = 1", 100, timeout=5) == 100


def test_a_writer_that_dies_is_restarted_and_recording_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The child killed: one log line, a new child, and what is put afterwards lands."""
    url, blobs = urls(tmp_path)
    caplog.set_level(logging.WARNING, logger="flightlog.capture")

    async def main() -> None:
        writer = make(url, blobs)
        await writer.start()
        for n in range(50):
            writer.put(request(n))
        await asyncio.sleep(1.0)  # committed by the first child (50 ms flushes)
        assert writer._proc is not None
        first = writer._proc.pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while (writer._proc.pid == first or writer._pipe is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert writer._proc.pid != first, "a new writer process was started"
        for n in range(50, 120):
            writer.put(request(n))
        await writer.stop(timeout=10)

    asyncio.run(main())
    assert wait_for(url, blobs, "1 = 1", 120, timeout=5) == 120
    lines = [r.getMessage() for r in caplog.records]
    assert sum("writer process exited" in line for line in lines) == 1


def test_a_stalled_writer_bounds_memory_drops_and_records_the_count(tmp_path: Path) -> None:
    """The child stopped (SIGSTOP): put() never blocks, past the bound items are dropped and counted,
    and once it runs again the count is recorded as a capture.overflow event."""
    url, blobs = urls(tmp_path)
    body = b"x" * 64 * 1024

    async def main() -> tuple[int, int]:
        writer = make(url, blobs)
        writer.max_bytes = 4 * 1024 * 1024
        await writer.start()
        await asyncio.sleep(0.5)
        assert writer._proc is not None
        os.kill(writer._proc.pid, signal.SIGSTOP)
        accepted = 0
        for n in range(400):  # 25 MiB against a 4 MiB bound (plus the 1 MiB pipe), the child stopped:
            accepted += writer.put(response(n, body))  # each returns, so put never waits for the writer
            await asyncio.sleep(0)
        assert writer.backlog() <= writer.max_bytes
        os.kill(writer._proc.pid, signal.SIGCONT)
        dropped = writer.dropped
        await writer.stop(timeout=10)
        return accepted, dropped

    accepted, dropped = asyncio.run(main())
    assert dropped == 400 - accepted > 0
    assert wait_for(url, blobs, "kind = 'http.response'", accepted, timeout=5) == accepted
    ledger = open_ledger(url, blobs)
    try:
        with ledger.engine.connect() as c:
            errors = [
                row[0] for row in c.execute(text("SELECT error FROM events WHERE kind = 'capture.overflow'"))
            ]
    finally:
        ledger.close()
    assert sum(int(e.split()[0]) for e in errors) == dropped


def overflow_counts(url: str, blobs: str) -> list[int]:
    """The count each capture.overflow event in the Ledger records."""
    ledger = open_ledger(url, blobs)
    try:
        with ledger.engine.connect() as c:
            rows = c.execute(text("SELECT error FROM events WHERE kind = 'capture.overflow'"))
            return [int(row[0].split()[0]) for row in rows]
    finally:
        ledger.close()


def test_drops_reported_in_a_frame_sent_again_are_recorded_once(tmp_path: Path) -> None:
    """The proxy's drops travel in a frame; a writer killed after committing their overflow event but
    before its acknowledgement reached the proxy (the ack reader is held here) gets that frame again
    from the restarted writer's proxy side: the drops are recorded once, not twice."""
    url, blobs = urls(tmp_path)
    body = b"x" * 64 * 1024

    async def main() -> int:
        writer = make(url, blobs)
        writer.max_bytes = 512 * 1024
        await writer.start()
        assert writer._proc is not None and writer._acks is not None
        writer._acks.cancel()  # the kill below lands between the commits and their acknowledgement
        os.kill(writer._proc.pid, signal.SIGSTOP)
        for n in range(40):  # 2.5 MiB against the 1 MiB pipe and a 512 KiB bound: some are dropped
            writer.put(response(n, body))
            await asyncio.sleep(0)
        dropped = writer.dropped
        assert dropped > 0
        os.kill(writer._proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 20
        while sum(await asyncio.to_thread(overflow_counts, url, blobs)) < dropped:
            assert time.monotonic() < deadline, "the first writer records the drops"
            await asyncio.sleep(0.1)
        first = writer._proc.pid
        os.kill(first, signal.SIGKILL)
        while writer._proc.pid == first:  # restarted, and handed every frame again
            assert time.monotonic() < deadline + 20, "the writer is restarted"
            await asyncio.sleep(0.1)
        await writer.stop(timeout=10)
        return dropped

    dropped = asyncio.run(main())
    assert sum(overflow_counts(url, blobs)) == dropped


ANSWERED = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    sys.path.insert(0, {root!r})
    from tests.capture.test_writer_process import make, request, response

    async def main():
        writer = make({url!r}, {blobs!r})
        await writer.start()
        for n in range(3):
            writer.put(request(n))
            writer.put(response(n))
        held = writer.answered()  # what a hook returns just before mitmproxy sends the answer
        if held is not None:
            await held
        os.kill(os.getpid(), signal.SIGKILL)  # at once: the 5 ms send delay has not passed

    asyncio.run(main())
    """
)


def test_what_an_answer_waited_for_survives_a_proxy_killed_right_after(tmp_path: Path) -> None:
    """Once `answered()` returns (or its future resolves), the records put before it are in the
    kernel pipe, which the writer drains after the proxy's SIGKILL: none waits out the send delay."""
    url, blobs = urls(tmp_path)
    script = ANSWERED.format(root=str(ROOT), url=url, blobs=blobs)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert wait_for(url, blobs, "1 = 1", 6) == 6


def test_a_full_pipe_holds_an_answer_only_within_its_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer stopped (SIGSTOP) and its pipe full: an answer is held until its records reach the
    kernel (released, unprotected 0, once the writer reads again); held no longer than HOLD_SECONDS
    while the writer stays stopped (then each answer counted unprotected); and not held at all past
    HOLD_BYTES. Every record is written in the end, so the stop says nothing of copies not kept."""
    from recording import answer_holds

    url, blobs = urls(tmp_path)
    body = b"x" * 64 * 1024

    async def fill(writer: WriterProcess, until: int) -> None:
        n = 0
        while writer.backlog() <= until:
            n += 1
            writer.put(response(n, body))
            await asyncio.sleep(0.006)  # past the send delay: the frames go to the pipe

    async def main() -> None:
        writer = make(url, blobs)
        await writer.start()
        assert writer._proc is not None
        pid = writer._proc.pid
        os.kill(pid, signal.SIGSTOP)
        await fill(writer, 0)  # the kernel pipe is full; a frame waits on this side
        held = writer.answered()
        assert held is not None, "the answer waits for its records"
        await asyncio.sleep(0.05)
        assert not held.done()
        os.kill(pid, signal.SIGCONT)
        await asyncio.wait_for(held, 5)
        assert writer.unprotected_answers == 0

        os.kill(pid, signal.SIGSTOP)
        await fill(writer, 0)
        writer.put(request(10_000))
        started = time.monotonic()
        held, again = writer.answered(), writer.answered()
        assert held is not None and again is held, "the answers of one loop iteration share one frame"
        await asyncio.wait_for(held, 30)  # the child is stopped: only the hold's bound can release it
        assert time.monotonic() - started + 0.01 >= answer_holds.HOLD_SECONDS
        assert writer.unprotected_answers == 2, "each answer released unprotected is counted"

        await fill(writer, answer_holds.HOLD_BYTES)
        assert writer.answered() is None, "far behind: the answer goes at once"
        assert writer.unprotected_answers == 3
        os.kill(pid, signal.SIGCONT)
        await writer.stop(timeout=10)
        assert writer.unacknowledged == 0

    with caplog.at_level(logging.WARNING, logger="flightlog.capture"):
        asyncio.run(main())
    assert not [r for r in caplog.records if "without a copy kept" in r.getMessage()], caplog.text


def test_a_writer_dead_after_a_life_restarts_at_once_and_quick_deaths_back_off() -> None:
    """The first death is restarted at once (no answer should wait unprotected); each quick death
    after it waits twice as long as the one before, from 0.5 s, never more than RESTART_MAX."""
    delays = [restart_delay(n) for n in range(9)]
    assert delays == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, RESTART_MAX, RESTART_MAX]
