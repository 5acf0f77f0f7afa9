"""The writer in its own process, fed over a pipe: the proxy's event loop never shares the GIL with it.

Measured with `python -m bench.capture`: a writer thread inside the proxy process (hashing,
compressing, redacting, SQLite or COPY) took the GIL from mitmproxy's event loop for a quarter of
its time, and throughput fell by a third or more against plain mitmdump (the hooks alone, a tenth).
So the thread runs in a child process (`recording.writer.child`); the proxy keeps what must stay:

- `put()` (on the event loop) appends the record to a list; every few milliseconds the list is
  pickled into one frame and written to the child's stdin by a `PipeWriter`, which never blocks and
  never copies what must wait. The bound is the bytes waiting on this side (the list and the frames
  the pipe has not taken yet): past it
  an item is dropped and counted, and the count goes to the child, which records it as a
  `capture.overflow` event. Behind the pipe, the child's `Writer` keeps its own bounded queue.
  Before that bound, while half of it waits here, the proxy's reads wait for the pipe to take it
  (`room()`, `pacing`); the child stops reading the pipe while its own queue is nearly full
  (`Writer.wait_for_room`): so a writer behind slows the reads, and a large stream is slowed, not cut.
- An answer's records are in the kernel pipe before its bytes go to the client: the hooks that
  precede an answer (response, error, WebSocket message and end) return `answered()`, a future
  resolved once what waits is written (one frame per loop iteration for all its answers). The pipe
  outlives a `kill -9` of this process (the child drains it), so what was answered is not lost with
  it. When the pipe is full the hook waits for it to take the records, within the bound of
  `answer_holds` (`HOLD_BYTES`, `HOLD_SECONDS`); past it, or with no writer running, the answer
  goes unheld and is counted in `unprotected_answers`.
- Each frame is kept until the child acknowledges it (its records committed) and sent again to a
  restarted child; past `max_bytes` of kept frames the oldest are let go (`unprotected`).
- Sync paths commit in this process (`SyncCommitter`): the sender is waiting, not the writer.
- The child runs in its own session and ignores SIGINT and SIGTERM (a terminal's Ctrl-C, a service
  manager's SIGTERM to every process): it drains and exits when this side sends `stop` and closes
  the pipe, or when this process dies and the pipe reaches end of file. A child that exits on its
  own is restarted, with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recording import events as ev
from recording.answer_holds import AnswerHolds, resolve
from recording.records import (
    Buffers,
    Record,
    RequestRecord,
    ResponseRecord,
    StreamChunk,
    chunks_lost,
    size_of,
    to_wire,
)
from recording.sync_commit import SyncCommitter
from recording.writer.pacing import Pacing
from recording.writer.pipe_frames import ACK, READY, frame
from recording.writer.pipe_writer import PipeWriter
from recording.writer.retained_frames import RetainedFrames
from recording.writer.risk_journal import RiskJournal, journal_path
from storage.configuration import default

if TYPE_CHECKING:
    from storage.ledger import Ledger  # SQLAlchemy is loaded in this process only if a sync path runs

log = logging.getLogger("flightlog.capture")

Item = Record
RESTART_DELAY = 0.5
RESTART_MAX = 30.0
STEADY = 30.0
"""A writer that ran this long before dying was killed, not broken: it is restarted at once again."""
SEND_DELAY = 0.005
"""Records gather this long before one frame carries them all: one pickle and one write syscall per
few milliseconds instead of one per loop iteration (the writer batches for longer anyway)."""
CHILD_MODULE = "recording.writer.child"
READY_TIMEOUT = 15.0
"""A child still importing after this long (a cold disk) is waited for by records, not by the start."""


@dataclass(frozen=True, slots=True)
class WriterSpec:
    """What the child needs to open the Ledger and where it leaves its counters."""

    ledger_url: str
    blobs_url: str
    collector: str
    drain_timeout: float = default("drain_timeout")
    stats_file: str = ""
    flush_interval: float = 0.05
    """How long events gather before a batch commits (`mcp-record`: longer, fewer commits per call)."""
    journal: str = ""
    """The folder of the runs' risk journals (`risk_journal`); empty: none kept."""
    witnesses: tuple[str, ...] = ()
    """Where the writer publishes signed checkpoints (`storage.witness`): at the interval and at stop."""
    checkpoint_interval: float = default("checkpoint_interval")


def _child_env() -> dict[str, str]:
    """The environment with flightlog's own source first on the path, so `-m` finds it anywhere
    (a checkout loaded with `mitmdump -s` is not necessarily installed)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def restart_delay(quick_deaths: int) -> float:
    """Seconds before starting a writer again, after `quick_deaths` deaths each within `STEADY` of its
    start. The first is restarted at once: while no writer runs, answers go out before their records
    reach a pipe. A child that keeps dying at once (a broken install) is retried ever more slowly:
    `RESTART_DELAY`, doubling to `RESTART_MAX`."""
    return min(RESTART_DELAY * 2 ** (quick_deaths - 1), RESTART_MAX) if quick_deaths else 0.0


class WriterProcess:
    """The proxy's side of the writer process: a non-blocking `put()`, the sync path, start and stop."""

    def __init__(
        self,
        spec: WriterSpec,
        processing: ev.Processing,
        open_ledger: Callable[[float], Ledger],
        *,
        max_bytes: int = 32 * 1024 * 1024,
        send_delay: float = SEND_DELAY,
    ) -> None:
        self.spec = spec
        self._processing = processing
        self.max_bytes = max_bytes
        self.send_delay = send_delay
        """How long items gather before one frame carries them (`mcp-record` sends less often)."""
        self.dropped = 0
        self._sync = SyncCommitter(open_ledger, spec.collector)
        self._batch: list[Item] = []
        self._batch_bytes = 0
        self._reported_dropped = 0
        self._lost_streams: set[str] = set()
        self._scheduled = False
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._pipe: PipeWriter | None = None
        self._watch: asyncio.Task[None] | None = None
        self._acks: asyncio.Task[None] | None = None
        self._frame_number = 0
        self.run = os.urandom(6).hex()
        """This process's run, in the ids of the overflow events of its drops: its frame numbers
        start again at 1 in the next proxy, under the same collector."""
        self.journal = (
            RiskJournal(journal_path(Path(spec.journal), spec.collector, self.run)) if spec.journal else None
        )
        """Where the ids of answers that went out before their records were safe are written down."""
        at_risk = self.journal.note if self.journal is not None else lambda ids: None
        self._unacked = RetainedFrames(max_bytes, at_risk)
        self._holds = AnswerHolds(at_risk)
        self.pacing = Pacing(self.backlog, pause_at=max_bytes // 2, resume_at=max_bytes * 3 // 8)
        """Backpressure: the proxy's reads wait while half the bound waits on this side (`pacing`)."""
        self._answer_wait: asyncio.Future[None] | None = None
        self._answers_waiting: list[str] = []
        """The exchange ids of the answers sharing `_answer_wait` (each is counted if it goes
        unprotected)."""

    # -- configuration -----------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Once `stop()` began, records put are dropped (nothing would write them)."""
        return self._stopping

    @property
    def pid(self) -> int | None:
        """The writer process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def processing(self) -> ev.Processing:
        return self._processing

    @processing.setter
    def processing(self, value: ev.Processing) -> None:
        """New secrets or prices reach the child before any record put after this call."""
        self._processing = value
        self._flush()
        self._write(("processing", value))

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the child; records put before it listens wait on this side (within the bound)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        await self._spawn()
        self._watch = asyncio.create_task(self._watch_child())

    async def _spawn(self) -> None:
        read_end, write_end = os.pipe()  # not inheritable: only the child's stdin holds the read end
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                CHILD_MODULE,
                stdin=read_end,
                stdout=asyncio.subprocess.PIPE,
                env=_child_env(),
                start_new_session=True,  # a terminal's Ctrl-C goes to the proxy, which decides when to stop
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        assert self._proc.stdout is not None
        self._pipe = PipeWriter(asyncio.get_running_loop(), write_end)
        self._pipe.on_sent = partial(self._pipe_took, self._pipe)
        self._write(("start", self.spec, self._processing, self.run))
        if self._unacked:  # a restarted child: what the last one did not acknowledge, in order, again
            log.warning("flightlog: sending %d unacknowledged frames to the new writer", len(self._unacked))
            for pieces in self._unacked.pieces():
                self._write_pieces(pieces)
        self._flush()
        ready = asyncio.ensure_future(self._proc.stdout.readexactly(len(READY)))
        try:  # the child says READY once it reads: the proxy announces itself only then
            await asyncio.wait_for(asyncio.shield(ready), READY_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError):
            log.warning(
                "flightlog: the writer process is not ready after %.0f s; records wait for it", READY_TIMEOUT
            )
        self._acks = asyncio.create_task(self._read_acks(self._proc.stdout, ready))

    def _pipe_took(self, pipe: PipeWriter) -> None:
        """The pipe took what waited (or closed): held answers and paused reads may go on."""
        self._holds.release(pipe)
        self.pacing.settled()

    async def _read_acks(self, stdout: asyncio.StreamReader, ready: asyncio.Future[bytes]) -> None:
        """Release each frame the child acknowledges (until its stdout ends)."""
        try:
            await ready
            while True:
                (number,) = ACK.unpack(await stdout.readexactly(ACK.size))
                self._unacked.settled(number)
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    async def _watch_child(self) -> None:
        quick_deaths = 0
        while not self._stopping and self._proc is not None:
            started = time.monotonic()
            code = await self._proc.wait()
            if self._stopping:
                return
            if self._pipe is not None:
                self._pipe.close()
                self._pipe = None
            if time.monotonic() - started > STEADY:
                quick_deaths = 0
            delay = restart_delay(quick_deaths)
            quick_deaths += 1
            when = f"in {delay:g} s" if delay else "now"
            log.warning("flightlog: the writer process exited with code %s; restarting it %s", code, when)
            await asyncio.sleep(delay)
            if not self._stopping:
                await self._spawn()

    async def stop(self, timeout: float = 30.0) -> None:
        """Send what is waiting, tell the child to drain (retrying until `timeout`), wait for it."""
        self._stopping = True
        self.pacing.release()
        self._flush()
        self._write(("stop", timeout))
        self._sync.close()
        if self._watch is not None:
            self._watch.cancel()
        proc, pipe = self._proc, self._pipe
        self._pipe = None
        if pipe is not None:
            pipe.close()  # end of file once what waits is written
        if proc is not None:
            await self._drained(proc, timeout)
        if self.journal is not None:  # every frame acknowledged: nothing written down is at risk
            self.journal.close(settled=not self._unacked)

    async def _drained(self, proc: asyncio.subprocess.Process, timeout: float) -> None:
        """Wait for the child's drain (kill it past `timeout`) and its last acknowledgements."""
        try:
            await asyncio.wait_for(proc.wait(), timeout + 10)
        except TimeoutError:
            log.warning("flightlog: the writer process did not finish draining; stopping it")
            proc.kill()
            await proc.wait()
        if self._acks is not None:  # the last acknowledgements, so `unacknowledged` is exact
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._acks, 1)
        if self.unacknowledged and (self.unprotected or self.unprotected_answers):
            # Only when something was not confirmed written: records that went without a copy and
            # were written all the same lost nothing, and the stop line says "nothing lost".
            log.warning(
                "flightlog: %d answers went out before their records reached the writer's pipe and %d"
                " records were sent without a copy kept (the writer was behind or restarting)",
                self.unprotected_answers,
                self.unprotected,
            )

    @property
    def unprotected_answers(self) -> int:
        """Answers that went to their clients before their records were in the kernel pipe (no
        writer running, or past `HOLD_BYTES` / `HOLD_SECONDS`): a proxy killed then would lose them."""
        return self._holds.unprotected

    @property
    def unacknowledged(self) -> int:
        """Records sent and not (yet) acknowledged as settled by the writer process."""
        return self._unacked.records

    @property
    def unprotected(self) -> int:
        """Records let go unacknowledged past the copy bound (`retained_frames`)."""
        return self._unacked.unprotected

    # -- answers: their records in the kernel pipe before their bytes go to the client -------------

    def answered(self, exchange: str = "") -> asyncio.Future[None] | None:
        """Called by a hook whose answer goes to its client when the hook returns. The kernel pipe
        outlives this process (the writer drains it after a `kill -9` of the proxy), so an answer is
        not lost once the records put before it are in it. None when they are; else a future to
        await: every answer of one loop iteration shares it, and one frame written by `call_soon`
        resolves it (one frame per answer, written in the hook, cost the proxy more CPU a request
        than the shared one, bench.capture). When the pipe is full it resolves as the pipe
        takes the frame, or when `HOLD_BYTES` / `HOLD_SECONDS` release the answer unprotected."""
        if not self._batch and self.dropped == self._reported_dropped:
            return self._hold([exchange])
        if self._answer_wait is None:
            if self._loop is None:
                return None
            self._answer_wait = self._loop.create_future()
            self._loop.call_soon(self._flush_answers)
        self._answers_waiting.append(exchange)
        return self._answer_wait

    def _flush_answers(self) -> None:
        wait, self._answer_wait = self._answer_wait, None
        answers, self._answers_waiting = self._answers_waiting, []
        self._flush()
        held = self._hold(answers)
        if wait is not None and not wait.done():
            if held is None:
                wait.set_result(None)
            else:
                held.add_done_callback(partial(resolve, wait))

    def _hold(self, answers: list[str]) -> asyncio.Future[None] | None:
        if self._loop is None:
            return None
        return self._holds.hold(self._loop, self._pipe, bool(self._batch), answers)

    # -- the producer side (mitmproxy's event loop) ------------------------------------------------

    def put(self, item: Item) -> bool:
        """Take an item without blocking; past the bound it is dropped and counted."""
        if self._loop is not None and threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self.put, item)
            return True
        size = size_of(item)
        if self._stopping or self.backlog() + size > self.max_bytes:
            self.dropped += 1
            if isinstance(item, StreamChunk):
                self._lost_streams.add(item.flow_id)
            return False
        if isinstance(item, ResponseRecord) and item.exchange.flow_id in self._lost_streams:
            self._lost_streams.discard(item.exchange.flow_id)
            item = chunks_lost(item)
        self._batch.append(item)
        self._batch_bytes += size
        if not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_later(self.send_delay, self._flush)
        return True

    def room(self) -> Awaitable[None] | None:
        """None when the proxy may read on; else what to await first (the writer is behind)."""
        return None if self._stopping else self.pacing.room()

    def backlog(self) -> int:
        """Bytes waiting on this side of the pipe."""
        buffered = self._pipe.buffered if self._pipe is not None else 0
        return self._batch_bytes + buffered

    def _flush(self) -> None:
        self._scheduled = False
        if self._pipe is None:
            return
        dropped, self._reported_dropped = self.dropped - self._reported_dropped, self.dropped
        if self._batch or dropped:
            batch, size, self._batch, self._batch_bytes = self._batch, self._batch_bytes, [], 0
            buffers: Buffers = {}
            wires = [to_wire(item, buffers) for item in batch]
            self._frame_number += 1
            message = ("items", wires, self._frame_number, dropped, time.time() if dropped else 0.0)
            pieces = frame(message, [body for _, body in buffers.values()])  # in index order
            self._write_pieces(pieces)
            answers = [item.exchange.flow_id for item in batch if type(item) is ResponseRecord]
            self._unacked.keep(self._frame_number, pieces, size, len(batch), answers)

    def _write(self, message: tuple[Any, ...], buffers: Sequence[bytes] = ()) -> None:
        self._write_pieces(frame(message, buffers))

    def _write_pieces(self, pieces: list[bytes]) -> None:
        if self._pipe is not None and not self._pipe.closed:
            self._pipe.write(*pieces)

    # -- the synchronous path ----------------------------------------------------------------------

    def commit_now(self, rec: RequestRecord) -> None:
        """Commit one request event before it is forwarded (called off the loop, in a thread)."""
        self._sync.commit(rec, self._processing)
