"""The writer thread against a real Ledger: batches, the Ledger going down and coming back, overflow."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from recording.events import Processing
from recording.identity import Identity
from recording.records import Exchange, RequestRecord, ResponseRecord, StreamChunk
from recording.writer.thread import Writer
from storage.ledger import Ledger, open_ledger


def exchange(n: int) -> Exchange:
    return Exchange(f"flow-{n}", "out", "GET", f"http://h/{n}", "h", Identity(agent="w"))


def request(n: int) -> RequestRecord:
    return RequestRecord(exchange(n), time.time(), b"GET /%d HTTP/1.1\r\nHost: h\r\n\r\n" % n, b"")


def count(ledger: Ledger, where: str = "1 = 1") -> int:
    with ledger.engine.connect() as c:
        return int(c.execute(text(f"SELECT count(*) FROM events WHERE {where}")).scalar() or 0)


class Switch:
    """A Writer's Ledger opener that is down until `up` is set, then opens a SQLite Ledger in
    `folder`. Down, it opens `refused` (a real connection refused at a closed port) when given,
    else raises ConnectionError as a refused connection would."""

    def __init__(self, folder: Path, refused: str | None = None) -> None:
        self.url, self.blobs = f"sqlite:///{folder / 'ledger.db'}", (folder / "blobs").as_uri()
        self.refused = refused
        self.up = False

    def __call__(self, retry: float) -> Ledger:
        if self.up:
            return open_ledger(self.url, self.blobs, retry_seconds=retry)
        if self.refused is not None:
            return open_ledger(self.refused, self.blobs, retry_seconds=0)
        raise ConnectionError("connection refused (test: the Ledger is down)")


def test_writer_batches_pairs_and_streams(ledger_url: str, tmp_path: Path) -> None:
    """Requests, buffered answers and streamed answers all land, on SQLite and PostgreSQL alike."""
    blobs = (tmp_path / "blobs").as_uri()
    writer = Writer(
        lambda retry: open_ledger(ledger_url, blobs, retry_seconds=retry), Processing(), collector="t"
    )
    writer.start()
    for n in range(300):
        writer.put(request(n))
        writer.put(ResponseRecord(exchange(n), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", b"same body"))
    writer.put(request(999))
    for part in (b"data: 1\n\n", b"data: 2\n\n"):
        writer.put(StreamChunk("flow-999", part))
    writer.put(
        ResponseRecord(exchange(999), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", None, streamed=True)
    )
    writer.stop()
    ledger = open_ledger(ledger_url, blobs)
    assert count(ledger) == 602
    streamed = ledger.event("flow-999:response")
    assert streamed is not None and ledger.payload(streamed.payload_sha256 or "") == b"data: 1\n\ndata: 2\n\n"
    assert ledger.position("t") == writer.stats.batches
    ledger.close()


def test_ledger_down_then_back_overflow_is_counted_and_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Down: nothing blocks, one log line; the bound drops and counts; back: everything kept is written."""
    ledger_at = Switch(tmp_path)
    writer = Writer(ledger_at, Processing(), collector="t", max_items=50, batch_size=20, backoff_max=0.2)
    caplog.set_level(logging.WARNING, logger="flightlog.capture")
    writer.start()
    accepted = sum(writer.put(request(n)) for n in range(200))  # returns: put never waits for the Ledger
    time.sleep(1.0)
    accepted += sum(writer.put(request(n)) for n in range(200, 400))
    assert writer.stats.dropped == 400 - accepted > 0
    ledger_at.up = True
    writer.stop(timeout=10)
    ledger = open_ledger(ledger_at.url, ledger_at.blobs)
    assert count(ledger, "kind = 'http.request'") == accepted
    overflow = count(ledger, "kind = 'capture.overflow'")
    assert overflow == 1
    with ledger.engine.connect() as c:
        error = c.execute(text("SELECT error FROM events WHERE kind = 'capture.overflow'")).scalar()
    assert error is not None and error.startswith(f"{writer.stats.dropped} captured items dropped")
    ledger.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("ledger unavailable" in line for line in lines) == 1
    assert sum("ledger is back" in line for line in lines) == 1


def test_a_writer_whose_ledger_is_down_waits_for_its_retry_instead_of_spinning(tmp_path: Path) -> None:
    """A Ledger that refuses connections (a real closed port) while a few records are pending, far
    below the bound: the writer thread sleeps until each retry, so the process spends almost no CPU
    (it spun at ~1 s of CPU a second, a whole core per writer for as long as a database was down,
    taken from the proxies on the same machine). Records put meanwhile are taken in, and all are
    written once the Ledger is back."""
    with socket.socket() as s:  # a port nothing listens on: connecting is refused at once
        s.bind(("127.0.0.1", 0))
        closed = f"postgresql+psycopg://flightlog@127.0.0.1:{s.getsockname()[1]}/none"
    ledger_at = Switch(tmp_path, refused=closed)
    writer = Writer(ledger_at, Processing(), collector="t", backoff_max=0.5)
    writer.start()
    for n in range(5):
        writer.put(request(n))
    time.sleep(1.0)  # down, backing off to its longest wait
    cpu = time.process_time()
    time.sleep(2.0)
    for n in range(5, 10):
        writer.put(request(n))
    time.sleep(1.0)
    spent = time.process_time() - cpu
    assert spent < 0.3, f"the writer spent {spent:.2f} s of CPU in 3 s while the Ledger was down"
    ledger_at.up = True
    writer.stop(timeout=10)
    ledger = open_ledger(ledger_at.url, ledger_at.blobs)
    assert count(ledger, "kind = 'http.request'") == 10
    ledger.close()


def test_drops_reported_while_idle_and_down_are_recorded_once_the_ledger_is_back(tmp_path: Path) -> None:
    """Drops counted while nothing is pending (the proxy's `dropped` message, added to the writer's
    count as `writer_child` does) are reported by an overflow event of their own. If the Ledger is
    down when that report is first tried, it is tried again at each retry, not only with the next
    records: here no record ever comes, the Ledger comes back, and the count is written (it was
    kept in memory only until records came, and lost at exit if none did)."""
    ledger_at = Switch(tmp_path)
    writer = Writer(ledger_at, Processing(), collector="t", backoff_max=0.2)
    writer.start()
    writer.count_dropped(5)
    time.sleep(1.0)  # the report is tried at once and fails
    ledger_at.up = True
    time.sleep(1.0)  # back: the next retry writes it
    ledger = open_ledger(ledger_at.url, ledger_at.blobs)
    try:
        with ledger.engine.connect() as c:
            errors = (
                c.execute(text("SELECT error FROM events WHERE kind = 'capture.overflow'")).scalars().all()
            )
    finally:
        ledger.close()
    writer.stop(timeout=5)
    assert len(errors) == 1 and errors[0].startswith("5 captured items dropped"), errors


def wakeups(thread_id: int) -> int:
    """How many times the OS thread `thread_id` of this process has gone to sleep so far (each
    sleep of a thread that then wakes: a wake-up)."""
    status = Path(f"/proc/self/task/{thread_id}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("voluntary_ctxt"))


def test_an_idle_writer_sleeps_until_something_arrives(tmp_path: Path) -> None:
    """A proxy left on all day is idle most of it: with nothing queued, nothing pending and nothing
    to report, the writer thread waits on its queue without a timeout. It woke every 0.5 s to look
    (2 wake-ups a second per worker, the larger part of an idle proxy's 7.2). A record put after
    the quiet spell is still written at once."""
    ledger_at = Switch(tmp_path)
    ledger_at.up = True
    writer = Writer(ledger_at, Processing(), collector="t")
    writer.start()
    writer.put(request(0))
    deadline = time.monotonic() + 10
    while writer.stats.written < 1 and time.monotonic() < deadline:  # a loaded machine may take a while
        time.sleep(0.01)
    time.sleep(0.5)  # written, and idle since
    assert writer._thread is not None and writer._thread.native_id is not None
    before = wakeups(writer._thread.native_id)
    time.sleep(2.0)
    woke = wakeups(writer._thread.native_id) - before
    assert woke <= 1, f"the idle writer thread woke {woke} times in 2 s"
    writer.put(request(1))
    deadline = time.monotonic() + 5
    while writer.stats.written < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.stats.written == 2, "a record after the quiet spell waited"
    writer.stop(timeout=5)


def test_an_item_dropped_while_the_writer_is_idle_is_reported_without_waiting_for_more(
    tmp_path: Path,
) -> None:
    """An item larger than the whole byte bound is dropped even with an empty queue; the idle
    writer, which no longer wakes on its own, is woken to record the drop as it happens rather than
    with whatever record comes next (perhaps never)."""
    ledger_at = Switch(tmp_path)
    ledger_at.up = True
    writer = Writer(ledger_at, Processing(), collector="t", max_bytes=1024)
    writer.start()
    time.sleep(0.3)  # idle
    huge = ResponseRecord(exchange(1), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 4096)
    assert writer.put(huge) is False
    deadline = time.monotonic() + 3
    while writer.stats.batches < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.stats.batches == 1, "the drop was not reported while the writer was idle"
    writer.stop(timeout=5)
    ledger = open_ledger(ledger_at.url, ledger_at.blobs)
    assert count(ledger, "kind = 'capture.overflow'") == 1
    ledger.close()


def test_an_event_the_ledger_refuses_does_not_block_the_rest(tmp_path: Path) -> None:
    """A batch the Ledger refuses (bad content, not a lost connection) is written event by event, and
    the refused event is filed in its place as `capture.unrecordable` naming it and the error."""
    from datetime import UTC, datetime

    from recording.writer.refusals import one_by_one
    from storage.events import Batch, Event

    url, blobs = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    writer = Writer(lambda retry: open_ledger(url, blobs, retry_seconds=retry), Processing(), collector="t")
    ledger = open_ledger(url, blobs)
    good = Event("good:request", "good", "http.request", "out", datetime.now(UTC))
    bad = Event("bad:request", "bad", "http.request", "out", datetime.now(UTC), payload_state="complete")
    try:
        ledger.append(Batch("t", 1, (good, bad)))
    except Exception as e:
        refused = e
    else:
        raise AssertionError("the Ledger accepted a complete event without a payload")
    kept, position = one_by_one(ledger, "t", 0, [good, bad], refused, writer.stats)
    assert [e.event_id for e in kept] == ["good:request", "unrecordable:bad:request"] and position > 0
    assert writer.stats.rejected == 0 and writer.stats.unrecordable == 1
    assert ledger.event("good:request") is not None and ledger.event("bad:request") is None
    filed = ledger.event("unrecordable:bad:request")
    assert filed is not None and filed.kind == "capture.unrecordable" and filed.parent == "bad:request"
    assert filed.error is not None and "InvalidEvent" in filed.error and "needs a payload" in filed.error
    ledger.close()


def test_a_record_that_cannot_become_an_event_is_filed_with_its_bytes(tmp_path: Path) -> None:
    """A bug on the way to an event (here a price table that raises for one model) files that one
    record as `capture.unrecordable` with its head and body; the records around it are written."""
    from formats.usage import Usage

    class Boom(Exception):
        pass

    class Prices:
        def cost_of(self, usage: Usage, at: object = None) -> float:
            if usage.model == "m-1":
                raise Boom("bug")
            return 0.0

    def usage(url: str, *_: object) -> Usage:
        return Usage("openai", f"m-{url.rsplit('/', 1)[1]}", tokens_in=1, tokens_out=1)

    url, blobs = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    processing = Processing(extract_usage=usage, prices=Prices())  # type: ignore[arg-type]
    writer = Writer(lambda retry: open_ledger(url, blobs, retry_seconds=retry), processing, collector="t")
    writer.start()
    for n in range(3):
        writer.put(request(n))
        writer.put(ResponseRecord(exchange(n), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", b"body %d" % n))
    writer.stop(timeout=10)
    ledger = open_ledger(url, blobs)
    assert count(ledger, "kind = 'http.request'") == 3 and count(ledger, "kind = 'http.response'") == 2
    with ledger.engine.connect() as c:
        row = c.execute(
            text("SELECT event_id, error, head FROM events WHERE kind = 'capture.unrecordable'")
        ).one()
    filed = ledger.event(row[0])
    assert filed is not None and filed.action_id == "flow-1" and filed.head == b"HTTP/1.1 200 OK\r\n\r\n"
    assert "Boom: bug" in (filed.error or "")
    assert ledger.payload(filed.payload_sha256 or "") == b"body 1"
    ledger.close()


def test_a_writer_keeps_commit_delays_only_when_asked(tmp_path: Path) -> None:
    """Each answer's answer -> commit delay is kept for a stats file (the bench's figure), 8 bytes
    each; a writer nobody asks keeps none. Every writer kept them, up to a million Python floats
    (~32 MiB) held for the proxy's whole life."""
    kept: dict[bool, list[float]] = {}
    for keep in (False, True):
        url, blobs = f"sqlite:///{tmp_path / f'{keep}.db'}", (tmp_path / f"blobs-{keep}").as_uri()
        writer = Writer(
            lambda retry, u=url, b=blobs: open_ledger(u, b, retry_seconds=retry),
            Processing(),
            collector="t",
            keep_delays=keep,
        )
        writer.start()
        for n in range(50):
            writer.put(request(n))
            writer.put(ResponseRecord(exchange(n), time.time(), 200, b"HTTP/1.1 200 OK\r\n\r\n", b"x"))
        writer.stop()
        assert writer.stats.written == 100
        kept[keep] = list(writer.stats.delays)
    assert kept[False] == []
    assert len(kept[True]) == 50 and all(0 <= d < 60 for d in kept[True])
