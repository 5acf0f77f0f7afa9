"""One writer thread behind a bounded queue: the only place captured traffic reaches the Ledger.

It runs in the writer process (`recording.writer.child`), fed by the proxy's `WriterProcess`, so its
work never holds the proxy's GIL. `Writer.put()` is O(1), never blocks and never raises; the thread
redacts, reads usage, spools teed stream bodies with bounded memory, and appends batches flushed by
size or time. When the Ledger is down, traffic keeps flowing: the thread retries with backoff and
logs one line per change of state; once the queue bound is reached new items are dropped, counted,
and recorded as a `capture.overflow` event when the Ledger is back.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from recording import events as ev
from recording import refusal_events
from recording.mcp import http_messages as mcp_messages
from recording.mcp import live as mcp_live
from recording.mcp import stdio_events as mcp_stdio_events
from recording.os_names import name_os_thread
from recording.records import (
    AttemptRecord,
    Record,
    RefusalRecord,
    RequestRecord,
    ResponseRecord,
    StdioRecord,
    StreamChunk,
    SwapRecord,
    WebSocketRecord,
    chunks_lost,
    size_of,
)
from recording.stream_body import Deferred, StreamBody, streamed_answer
from recording.writer import refusals
from recording.writer.acks import FrameAcks
from recording.writer.outage import Outage
from recording.writer.refusals import line as _line
from recording.writer.refusals import one_by_one
from recording.writer.stats import DELAYS_KEPT, ProxyDrops, WriterStats
from storage.events import Batch, Event
from storage.ledger import Ledger

log = logging.getLogger("flightlog.capture")

Item = Record


_STOP = object()
_NUDGE = object()
"""Wakes an idle writer to look at its counts (a drop to report): no item of its own."""


ROOM_PATIENCE = 20.0
"""The longest the frame reader waits for the writer's queue to make room (`Writer.wait_for_room`)."""


class Writer:
    """The bounded queue and the thread that drains it into the Ledger."""

    def __init__(
        self,
        open_ledger: Callable[[float], Ledger],
        processing: ev.Processing,
        *,
        collector: str,
        max_items: int = 20_000,
        max_bytes: int = 128 * 1024 * 1024,
        batch_size: int = 500,
        flush_interval: float = 0.05,
        backoff_max: float = 10.0,
        retry_seconds: float = 2.0,
        keep_delays: bool = False,
    ) -> None:
        self._open_ledger = open_ledger
        self.keep_delays = keep_delays
        """Keep each answer's commit delay in `stats.delays` (for a stats file). A production writer
        kept them all, up to a million: ~32 MiB held for a figure only the bench reads."""
        self.processing = processing
        self.collector = collector
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.outage = Outage(backoff_max)
        self.retry_seconds = retry_seconds
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._produced_bytes = 0  # written by the producer (loop) thread only
        self._consumed_bytes = 0  # written by the writer thread only
        self._lost_streams: set[str] = set()
        self._ledger: Ledger | None = None
        self._ledger_lock = threading.Lock()
        self._position: int | None = None
        self._seq = 0
        self._pending: list[Event | Deferred] = []
        self._pending_frames: list[int | None] = []
        """The frame of each record behind the pending events (a streamed answer: one per chunk)."""
        self._stream_frames: dict[str, list[int | None]] = {}
        self.acks: FrameAcks | None = None
        self._pending_since = self._arrived = 0.0  # monotonic: the oldest pending record's arrival
        self._pending_bytes = 0
        self._streams: dict[str, StreamBody] = {}
        self._unpaced = False
        """`wait_for_room` waited its patience out: it waits no more until the queue is half empty."""
        self._reported_dropped = 0
        self._thread: threading.Thread | None = None
        self._stop_deadline, self._stop_requested = 0.0, False

    # -- producer side (mitmproxy's event loop) ---------------------------------------------------

    def put(self, item: Item, frame: int | None = None) -> bool:
        """Queue an item (of the proxy's `frame`) without blocking; when the bound is reached, count it
        as dropped (the overflow event records the count, which settles it)."""
        size = size_of(item)
        if (
            self._queue.qsize() >= self.max_items
            or self._produced_bytes - self._consumed_bytes + size > self.max_bytes
        ):
            self.stats.dropped += 1
            if isinstance(item, StreamChunk):
                self._lost_streams.add(item.flow_id)
            if self.acks is not None:
                self.acks.settle((frame,))
            if self._queue.empty():  # one item past the byte bound alone: wake the idle writer
                self._queue.put(_NUDGE)
            return False
        self._produced_bytes += size
        self._queue.put((item, frame, time.monotonic()))
        return True

    def wait_for_room(self, size: int, patience: float = ROOM_PATIENCE) -> None:
        """Block the caller (the writer process's frame reader) while the queue is three quarters
        full, so the pipe fills and the proxy reads more slowly (`recording.writer.pacing`) instead
        of this queue dropping at its bound. A writer that makes no room within `patience` (the
        Ledger gone) is waited for no more until its queue is back under half."""
        queued = self._produced_bytes - self._consumed_bytes
        if self._unpaced:
            if queued > self.max_bytes // 2:
                return
            self._unpaced = False
        deadline = time.monotonic() + patience
        while queued > 0 and (
            queued + size > self.max_bytes * 3 // 4 or self._queue.qsize() >= self.max_items * 3 // 4
        ):
            if self._thread is None or not self._thread.is_alive() or time.monotonic() > deadline:
                self._unpaced = True
                return
            time.sleep(0.002)
            queued = self._produced_bytes - self._consumed_bytes

    def put_proxy_drops(self, drops: ProxyDrops) -> None:
        """Queue the proxy's report of its drops, past any bound (it is a few bytes, one per frame):
        it becomes an overflow event, and its frame is acknowledged only once that event commits."""
        self.stats.proxy_dropped += drops.count
        self.put_event(
            ev.proxy_overflow_event(self.collector, drops.run, drops.frame, drops.count, drops.at),
            drops.frame,
        )

    def put_event(self, event: Event, frame: int | None = None) -> None:
        """Queue an event made beside the records (a drop report, a dead run's lost exchanges)."""
        self._queue.put((event, frame, time.monotonic()))

    def count_dropped(self, count: int) -> None:
        """Count `count` items dropped before they reached this writer, and wake it to record them."""
        self.stats.dropped += count
        self._queue.put(_NUDGE)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer thread (daemon: a killed process loses only what is queued)."""
        self._thread = threading.Thread(target=self._run, name="flightlog-writer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Drain everything queued into the Ledger (retrying until `timeout`), then stop."""
        if self._thread is None:
            return
        self._stop_deadline = time.monotonic() + timeout
        self._stop_requested = True
        self._queue.put(_STOP)
        self._thread.join(timeout + 5)
        self._thread = None
        if self._ledger is not None:
            self._ledger.close()
        self._ledger = None

    # -- the writer thread -------------------------------------------------------------------------

    def _ensure_ledger(self) -> Ledger:
        with self._ledger_lock:
            if self._ledger is None:
                self._ledger = self._open_ledger(self.retry_seconds)
            return self._ledger

    def _run(self) -> None:
        name_os_thread(b"flightlog-write")
        with contextlib.suppress(Exception):  # open it now, not when the first batch is due
            self._ensure_ledger()
        stopping = False
        while True:
            now = time.monotonic()
            backlog_full = len(self._pending) >= self.max_items or self._pending_bytes > self.max_bytes
            if (
                self._pending
                and self.outage.waiting(now)
                and not self._stop_requested
                and (backlog_full or self._queue.empty())
            ):
                # Nothing can be written before the retry and nothing is waiting to be taken in (or
                # the backlog is full: items stay queued, the bound is the queue's). Without this
                # sleep the loop below found nothing due and spun: a core per writer while down.
                time.sleep(min(self.outage.until_retry(), 0.2))
                continue
            if not stopping:
                if self._pending:
                    wait = self._pending_since + self.flush_interval - time.monotonic()
                    if wait > 0 and len(self._pending) < self.batch_size:
                        time.sleep(wait)  # let items gather: one wake-up per batch, not one per request
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        item = None
                else:
                    try:
                        item = self._queue.get(timeout=self._idle_wait())
                    except queue.Empty:
                        item = None
                if item is _STOP:
                    stopping = True
                elif item is not None and item is not _NUDGE:
                    self._handle(*item)
                    while len(self._pending) < self.batch_size:  # take what is already waiting
                        try:
                            more = self._queue.get_nowait()
                        except queue.Empty:
                            break
                        if more is _STOP:
                            stopping = True
                            break
                        if more is not _NUDGE:
                            self._handle(*more)
            now = time.monotonic()
            unreported = self.stats.dropped > self._reported_dropped
            due = self._pending and (
                stopping
                or len(self._pending) >= self.batch_size
                or now - self._pending_since >= self.flush_interval
                or unreported
            )
            retry_due = not self.outage.waiting(now)
            if due and retry_due:
                self._flush()
            elif not self._pending and unreported and retry_due:  # a report of drops alone, retried too
                self._pending_since = now
                self._flush()
            if stopping and self._queue.empty():
                settled = not self._pending and self.stats.dropped <= self._reported_dropped
                if settled or time.monotonic() >= self._stop_deadline:
                    if self._pending:
                        log.warning("flightlog: %d events not written at exit", len(self._pending))
                    elif not settled:
                        log.warning(
                            "flightlog: a count of %d dropped items not written at exit",
                            self.stats.dropped - self._reported_dropped,
                        )
                    return
                if self.outage.since is not None:
                    time.sleep(min(self.outage.until_retry(), 0.2))

    def _idle_wait(self) -> float | None:
        """How long a writer with nothing pending may wait for an item: for ever (None) unless a
        count of drops waits to be written, which is tried now or at the Ledger's next retry.
        Everything else that needs the writer comes through the queue (an item, a nudge, the stop),
        so a proxy left on wakes it only for traffic (it used to look twice a second for nothing)."""
        return None if self.stats.dropped <= self._reported_dropped else self.outage.until_retry()

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _add(self, event: Event | Deferred, frames: list[int | None]) -> None:
        if not self._pending:  # a batch's age runs from its oldest record's arrival, not its handling
            self._pending_since = self._arrived
        self._pending.append(event)
        self._pending_frames.extend(frames)
        payload = event.payload if isinstance(event, Event) else None
        self._pending_bytes += len(payload) if isinstance(payload, bytes) else 0
        self._pending.extend(mcp_messages.derived_from(event, self._next_seq))  # MCP over HTTP

    def _handle(self, item: Any, frame: int | None = None, arrived: float | None = None) -> None:
        """One record into the pending batch; one that cannot become an event (a bug in redaction
        or usage reading) is filed as `capture.unrecordable` with its bytes, and the rest go on.
        `arrived`: when `put` queued it (records that waited behind a commit need not wait again)."""
        self._arrived = time.monotonic() if arrived is None else arrived
        if isinstance(item, Event):
            self._add(item, [frame])
            return
        self._consumed_bytes += size_of(item)
        if isinstance(item, StreamChunk):
            self._stream_frames.setdefault(item.flow_id, []).append(frame)
        frames = [frame]
        if isinstance(item, ResponseRecord):
            frames += self._stream_frames.pop(item.exchange.flow_id, [])
        try:
            self._handle_one(item, frames)
        except Exception as e:
            if isinstance(item, StreamChunk):
                self._lost_streams.add(item.flow_id)
                return
            log.warning("flightlog: a %s could not become an event: %s", type(item).__name__, _line(e))
            self.stats.unrecordable += 1
            event = ev.unrecordable_record(item, e, collector=self.collector, seq=self._next_seq())
            self._add(event, frames)

    def _handle_one(self, item: Any, frames: list[int | None]) -> None:
        proc = self.processing
        if isinstance(item, StreamChunk):
            stream = self._streams.get(item.flow_id)
            if stream is None:
                stream = self._streams[item.flow_id] = self._new_stream(item.content_encoding)
            stream.write(item.data, item.at)
            for event in mcp_live.live(proc, item, self._next_seq):  # an open MCP stream's messages
                self._add(event, [])
        elif isinstance(item, RequestRecord):
            self._add(ev.request_event(proc, item, collector=self.collector, seq=self._next_seq()), frames)
        elif isinstance(item, ResponseRecord):
            self._add(self._response(item), frames)
        elif isinstance(item, WebSocketRecord):
            self._add(ev.websocket_event(proc, item, collector=self.collector, seq=self._next_seq()), frames)
        elif isinstance(item, StdioRecord):
            event = mcp_stdio_events.stdio_event(proc, item, collector=self.collector, seq=self._next_seq())
            self._add(event, frames)
        elif isinstance(item, AttemptRecord):
            self._add(ev.attempt_event(proc, item, collector=self.collector, seq=self._next_seq()), frames)
        elif isinstance(item, SwapRecord):
            self._add(ev.swap_event(proc, item, collector=self.collector, seq=self._next_seq()), frames)
        elif isinstance(item, RefusalRecord):
            refusal_events.add_to(self._add, frames, proc, item, self.collector, self._next_seq)

    def _new_stream(self, content_encoding: str = "") -> StreamBody:
        redactor = self.processing.redactor
        stream_redactor = redactor.stream(content_encoding or None) if redactor is not None else None
        return StreamBody.spooled(stream_redactor, content_encoding)

    def _response(self, rec: ResponseRecord) -> Event | Deferred:
        proc = self.processing
        seq = self._next_seq()
        if not rec.streamed:
            body, names, note = ev.redacted_body(proc, rec.body or b"", rec.content_encoding)
            usage = ev.usage_of(proc, rec, body)
            return ev.response_event(
                proc, rec, body, body_names=names, usage=usage, note=note, collector=self.collector, seq=seq
            )
        stream = self._streams.pop(rec.exchange.flow_id, None) or self._new_stream(rec.content_encoding)
        lost = rec.exchange.flow_id in self._lost_streams
        if lost:
            self._lost_streams.discard(rec.exchange.flow_id)
            rec = chunks_lost(rec)
        return streamed_answer(proc, rec, stream, collector=self.collector, seq=seq, lost=lost)

    def _flush(self) -> None:
        now = time.time()
        try:
            ledger = self._ensure_ledger()
            if self._position is None:
                self._position = ledger.position(self.collector) or 0
            events = [item if isinstance(item, Event) else item.stored(ledger) for item in self._pending]
            dropped = self.stats.dropped
            if dropped > self._reported_dropped:
                events.append(
                    ev.overflow_event(
                        self.collector, self._position + 1, dropped - self._reported_dropped, now
                    )
                )
            try:
                ledger.append(
                    Batch(collector=self.collector, position=self._position + 1, events=tuple(events))
                )
            except Exception as e:
                if refusals.outage(e):
                    raise
                # refused for something other than an outage: see `refusals.one_by_one`
                events, self._position = one_by_one(
                    ledger, self.collector, self._position, events, e, self.stats
                )
        except Exception as e:  # an outage, or a failure outside the Ledger's own (opening, spooling)
            if self.outage.went_down(e):  # the connection of a Ledger that went away is let go
                with self._ledger_lock:
                    if self._ledger is not None:
                        with contextlib.suppress(Exception):
                            self._ledger.close()
                        self._ledger = None
            return
        self._position += 1
        self._reported_dropped = dropped
        committed = time.time()
        self.stats.written += len(events)
        self.stats.batches += 1
        if self.keep_delays and len(self.stats.delays) < DELAYS_KEPT:
            self.stats.delays.extend(
                committed - e.at.timestamp() for e in events if e.kind == "http.response"
            )
        for item in self._pending:
            if isinstance(item, Deferred):
                item.body.file.close()
        self._pending = []
        self._pending_bytes = 0
        settled, self._pending_frames = self._pending_frames, []
        if self.acks is not None:
            self.acks.settle(settled)
        self.outage.back()
