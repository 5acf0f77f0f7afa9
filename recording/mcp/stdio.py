"""`flightlog mcp-record`: a stdio MCP server run as a child, relayed byte for byte, every line recorded.

Two threads relay, one per direction, with blocking `read`/`write` on the raw file descriptors and
nothing else in between: the client's stdin goes to the server's stdin and the server's stdout to our
stdout unchanged (stderr is the server's own, inherited). Each chunk read is also appended to an
in-memory inbox as it is read, so a request precedes its result (O(1), no wake-up); the event loop
takes the inbox every `TICK`, splits it into lines (MCP's stdio framing, `formats.jsonrpc.StdioLines`)
and hands them to the same `WriterProcess` the proxy uses, one frame per `SEND_EVERY`, so the Ledger's
speed or absence never reaches the relay and the wrapper's own work stays small beside the session's.
Lines become events in the writer process (`recording.mcp.stdio_events`).

What the client would see without flightlog, it sees with it:
- a line that is not JSON is relayed as it is and recorded as `mcp.invalid`;
- a line over `MAX_MESSAGE` (8 MiB, as request bodies through the proxy) is relayed whole and recorded
  without its bytes (`missing`, its size in the error; its first `jsonrpc.PEEK` bytes still pair it
  with its call) — memory stays bounded;
- a server that dies mid-call: its stdout ends, the wrapper exits with the server's exit code (or dies
  of the same signal), and the `mcp.exit` event names the calls left unanswered;
- a client that closes stdin: the server's stdin is closed; a client that stops reading: the server's
  stdout is closed, so the server gets EPIPE as it would;
- SIGTERM, SIGINT and SIGHUP are passed on to the server; the wrapper ends when the server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from formats.jsonrpc import StdioLines
from recording.events import Processing
from recording.identity import EMPTY, Identity
from recording.mcp.stdio_judge import ClientOut, LineGate, Refused, client_pump, refusal_record, server_pump
from recording.records import RefusalRecord, StdioRecord
from recording.writer.process import WriterProcess, WriterSpec

if TYPE_CHECKING:
    from storage.ledger import Ledger

log = logging.getLogger("flightlog.capture")

MAX_MESSAGE = 8 * 1024 * 1024
READ_SIZE = 65536
TICK = 0.05
"""How often the loop takes the inbox (lines wait there, never the relay): one wake-up a tick
however many lines arrive, so the wrapper's own work stays off the cores the session needs."""
BATCH_EVERY = 0.25
"""The writer process commits a batch this often: a session's lines are few and small, and each
commit costs its fixed share (transaction, chain link, blob lookups) however few events it holds."""
SEND_EVERY = 0.05
"""Records gather this long before one frame carries them to the writer process (its reads, its
wake-ups and its acks are per frame, not per line)."""
STDOUT_LINGER = 2.0
"""After the server exits, its stdout is read this much longer (a grandchild may still hold it)."""
DRAIN_WAIT = 1.5
"""The wrapper waits this long for the writer to commit at the end; the writer process (its own
session) keeps draining after that, so a client that kills the wrapper soon after loses nothing."""
SWITCH_INTERVAL = 0.0005
"""A relay thread woken by a read waits at most this long for the GIL (a tenth of Python's default)."""
WRITER_NICE = 10
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
BROKEN = select.POLLERR | select.POLLNVAL
"""A pipe's reader is gone (or the descriptor closed): what `poll` says of the relay's destination."""


@dataclass(frozen=True)
class RecordOptions:
    """What one `mcp-record` run needs."""

    command: Sequence[str]
    ledger_url: str
    blobs_url: str
    processing: Processing = field(default_factory=Processing)
    identity: Identity = EMPTY
    session: str = ""
    """The recording session's id (default: a fresh random one); event ids derive from it."""
    max_message: int = MAX_MESSAGE
    drain_wait: float = DRAIN_WAIT
    gate: LineGate | None = None
    """Asked about each `tools/call` the client sends (`recording.mcp.stdio_judge`); None: a byte pump."""


def _write_all(fd: int, data: bytes, written: int = 0) -> None:
    """Write what is left of `data` after its first `written` bytes (a partial or refused write)."""
    view = memoryview(data)[written:]
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[written:]


@dataclass
class _Ends:
    """How each side ended (set by the relay threads, read at the end)."""

    client_closed: bool = False
    client_gone: bool = False
    server_stdin_broken: bool = False


def _pump(
    src: int, dst: int, origin: str, inbox: deque[tuple[str, float, bytes]], on_end: Callable[[str], None]
) -> None:
    """Relay `src` to `dst` until end of file or a broken side; every chunk also goes to the inbox
    (one deque append beside the read and the write on the relay's path).

    A chunk goes to the inbox before it is written on: the inbox's order is then the order the
    chunks were read in, so a request always precedes its result (the server cannot answer what it
    has not been sent). Kept after the write, a result read by the other thread could come first
    while this one was descheduled between its write and its append, and was then recorded as an
    unmatched `mcp.result` (seen once in ten loaded `make test` runs). A chunk whose write failed is
    still recorded: it is what the side sent, and the end says the write failed.

    `dst` is watched while waiting for `src`: when its reader goes away (POLLERR on a pipe) we stop
    reading before the next chunk, so `src`'s reader closes and its writer gets EPIPE on its next
    write, as it would have written straight to the departed reader.
    """
    poller = select.poll()
    poller.register(src, select.POLLIN)
    poller.register(dst, 0)  # errors and hang-ups are always reported
    poll, read, write, keep, now = poller.poll, os.read, os.write, inbox.append, time.time
    how = "eof"
    while True:
        ready = poll()
        if len(ready) != 1 or ready[0][0] != src:  # the usual case, src readable alone, skips this
            if any(fd == dst and flags & BROKEN for fd, flags in ready):
                how = "write-error"
                break
            if not any(fd == src for fd, _ in ready):
                continue
        try:
            chunk = read(src, READ_SIZE)
        except OSError:
            how = "read-error"
            break
        if not chunk:
            break
        keep((origin, now(), chunk))  # before the write: see the docstring
        try:
            written = write(dst, chunk)
        except BlockingIOError:
            written = 0
        except OSError:
            how = "write-error"
            break
        try:
            if written < len(chunk):
                _write_all(dst, chunk, written)
        except OSError:
            how = "write-error"
            break
    on_end(how)


class Recording:
    """One run: the server child, the relay threads, the writer, and the lines handed to it."""

    def __init__(self, opts: RecordOptions, stdin: int = 0, stdout: int = 1) -> None:
        self.opts = opts
        self.session = opts.session or uuid.uuid4().hex[:16]
        self.server = shlex.join(opts.command)
        self.stdin, self.stdout = stdin, stdout
        self.inbox: deque[tuple[str, float, bytes]] = deque()
        self.refusals: deque[RefusalRecord] = deque()
        self.lines = {"client": StdioLines(opts.max_message), "server": StdioLines(opts.max_message)}
        self.ends = _Ends()
        self.writer: WriterProcess | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.sent = 0
        self.last_at: dict[str, float] = {}
        """When each side's last chunk was read (a line cut short at the end is stamped then)."""

    def _record(
        self, origin: str, index: int, data: bytes, size: int, at: float, note: str | None = None
    ) -> None:
        """One line, stamped `at`: when the relay read the chunk that ended it (not when this runs,
        which may be later: the recorder takes the inbox every tick, and later still when busy)."""
        assert self.writer is not None
        if len(data) < size:
            note = (
                f"a message of {size} bytes, over the {self.opts.max_message} byte limit: relayed, not kept"
            )
        self.sent += 1
        self.writer.put(
            StdioRecord(
                self.session,
                self.server,
                self.opts.identity,
                origin,
                index,
                at,
                data,
                size,
                None,
                note,
            )
        )

    def take_inbox(self) -> int:
        """Cut what arrived into lines and record them; returns how many chunks were taken."""
        taken = 0
        while self.inbox:
            origin, at, chunk = self.inbox.popleft()
            taken += 1
            self.last_at[origin] = at
            for index, data, size in self.lines[origin].feed(chunk):
                self._record(origin, index, data, size, at)
        while self.refusals and self.writer is not None:  # after the call's line, taken above
            self.writer.put(self.refusals.popleft())
        return taken

    async def run(self) -> int:
        """Run the server to its end; the server's exit code (negative: killed by that signal)."""
        loop = asyncio.get_running_loop()
        spec = WriterSpec(
            self.opts.ledger_url,
            self.opts.blobs_url,
            f"mcp-record:{self.session}",
            flush_interval=BATCH_EVERY,
        )
        self.writer = WriterProcess(spec, self.opts.processing, _opener(self.opts), send_delay=SEND_EVERY)
        try:
            self.proc = subprocess.Popen(
                list(self.opts.command), stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except OSError as e:
            self._edge("start", None, f"cannot start the server: {e.strerror or e}")
            self._edge("end", 127, "the server did not start")
            await self._start_writer()
            await self._finish()
            raise
        self._edge("start", None, None, {"command": list(self.opts.command), "pid": self.proc.pid})
        for sig in FORWARDED:
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, self._forward, sig)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        to_server, from_server = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        up, down = self._pumps(to_server, from_server)
        up.start()
        down.start()
        # The server and the relay run before the writer process is up: the client never waits for
        # the Ledger, not even at start. What arrives meanwhile waits in the inbox.
        await self._start_writer()
        exited = loop.run_in_executor(None, self.proc.wait)
        while not exited.done():
            self.take_inbox()
            await asyncio.wait({exited}, timeout=TICK)
        code = exited.result()
        await loop.run_in_executor(None, down.join, STDOUT_LINGER)
        self.take_inbox()
        for origin, lines in self.lines.items():
            if (rest := lines.rest()) is not None:
                index, data, size = rest
                note = "cut short: the stream ended without a newline"
                at = self.last_at.get(origin, time.time())
                self._record(origin, index, data, size, at, note if len(data) == size else None)
        self._edge("end", code, self._end_note(code))
        await self._finish()
        return code

    def _pumps(self, to_server: int, from_server: int) -> tuple[threading.Thread, threading.Thread]:
        """The relay's two threads: byte pumps, or with a gate, line-aware ones (`mcp_stdio_gate`)."""
        if self.opts.gate is None:
            up_args: tuple[object, ...] = (self.stdin, to_server, "client", self.inbox, self._client_ended)
            down_args: tuple[object, ...] = (
                from_server,
                self.stdout,
                "server",
                self.inbox,
                self._server_ended,
            )
            return threading.Thread(target=_pump, args=up_args, daemon=True), threading.Thread(
                target=_pump, args=down_args, daemon=True
            )
        out = ClientOut(self.stdout)
        refused = self._refused
        up_args = (self.stdin, to_server, self.inbox, self._client_ended, self.opts.gate, out, refused)
        down_args = (from_server, out, self.inbox, self._server_ended)
        return threading.Thread(target=client_pump, args=up_args, daemon=True), threading.Thread(
            target=server_pump, args=down_args, daemon=True
        )

    def _refused(self, said: Refused) -> None:
        self.refusals.append(refusal_record(said, self.session, self.server, self.opts.identity))

    async def _start_writer(self) -> None:
        assert self.writer is not None
        await self.writer.start()
        _lower_priority(self.writer.pid)

    def _end_note(self, code: int) -> str | None:
        notes = []
        if code < 0:
            notes.append(f"the server was killed by signal {-code}")
        elif code:
            notes.append(f"the server exited with code {code}")
        if self.ends.client_gone:
            notes.append("the client stopped reading the server's output")
        if self.ends.server_stdin_broken:
            notes.append("the server stopped reading its input")
        return "; ".join(notes) or None

    def _edge(self, origin: str, code: int | None, note: str | None, what: object = None) -> None:
        assert self.writer is not None
        data = json.dumps(what, ensure_ascii=False).encode() if what is not None else b""
        self.writer.put(
            StdioRecord(
                self.session,
                self.server,
                self.opts.identity,
                origin,
                0,
                time.time(),
                data,
                len(data),
                code,
                note,
            )
        )

    async def _finish(self) -> None:
        if self.writer is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.writer.stop()), self.opts.drain_wait)

    def _forward(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def _client_ended(self, how: str) -> None:
        """Our stdin ended (the client closed it) or the server's stdin broke: close the server's."""
        if how == "write-error":
            self.ends.server_stdin_broken = True
        else:
            self.ends.client_closed = True
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _server_ended(self, how: str) -> None:
        """The server's stdout ended, or our stdout broke (the client left): close the server's stdout."""
        if how == "write-error":
            self.ends.client_gone = True
            if self.proc is not None and self.proc.stdout is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdout.close()


def _lower_priority(pid: int | None) -> None:
    """The writer process yields the CPU to the client and the server: on a busy machine its work
    (hashing, compressing, committing) waits for idle time instead of slowing the session."""
    if pid is not None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, pid, WRITER_NICE)


def _opener(opts: RecordOptions) -> Callable[[float], Ledger]:
    def open_it(retry: float) -> Ledger:
        # deferred: SQLAlchemy loads in the writer process, not here (no sync path is ever used)
        from storage.ledger import open_ledger

        return open_ledger(opts.ledger_url, opts.blobs_url, retry_seconds=retry)

    return open_it


def record(opts: RecordOptions) -> int:
    """Run one recorded session; the process exit code to use (the server's, 128+N for a signal N)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    recording = Recording(opts)
    code = asyncio.run(recording.run())
    if code < 0:
        sig = -code
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)  # die as the server did, so the client sees the same end
        return 128 + sig
    return code
