"""A relay inside the proxy process that owns the upstream read of streaming requests.

mitmproxy closes the upstream connection the moment a client leaves, so a teed stream would stop
with it. For requests that look like streams (SSE, `"stream": true`), the capture addon points the
upstream hop at this relay (plain HTTP on loopback, a one-use token header naming the real target).
The relay opens the real upstream connection itself (TLS verified like mitmproxy's own upstream
connections), pipes bytes both ways untouched, records the answer as it arrives, and when
mitmproxy's side closes it keeps reading upstream for up to `grace` seconds and records what
arrived: `complete` when the whole answer was read (whether or not the client stayed for the last
byte), `partial` with an error saying why when bytes are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from addons.wire.errors import FramingError, HeadError
from addons.wire.framing import Body, UntilClose, request_body, response_body
from addons.wire.heads import parse_wire_head, remove_fields
from recording.records import Exchange, ResponseRecord, StreamChunk
from storage.heads import Head

log = logging.getLogger("flightlog.capture")

TOKEN_HEADER = "X-Flightlog-Relay"
HEAD_MAX = 256 * 1024
CONNECT_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class RelayJob:
    """Where one relayed request really goes, and what its answer is recorded with."""

    exchange: Exchange
    scheme: str
    host: str
    port: int
    sni: str | None
    method: bytes
    request_body: bytes | None
    started: float | None = None
    """When the client's request started (epoch seconds): the answer's timing is relative to it."""


class _Gone(Exception):
    """mitmproxy's side of the relay connection closed (the client left)."""


async def _read_head(reader: asyncio.StreamReader, buf: bytes) -> tuple[bytes | None, bytes]:
    """One head (through its empty line) and the bytes after it; None at a clean end of stream."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > HEAD_MAX:
            raise HeadError("head too large")
        data = await reader.read(65536)
        if not data:
            if buf:
                raise HeadError("connection closed inside a head")
            return None, b""
        buf += data
    end = buf.index(b"\r\n\r\n") + 4
    return buf[:end], buf[end:]


def _split(framing: Body, data: bytes) -> tuple[bytes, bytes, bytes]:
    """Feed `data`: (body bytes, the raw wire bytes that belong to this message, the rest)."""
    body, rest = framing.feed(data)
    return body, data[: len(data) - len(rest)], rest


def trailer_error(trailers: list[bytes], error: str | None) -> str:
    """What the answer's trailers were (recorded honestly) and what the client got instead."""
    fields = "; ".join(t.decode("latin-1") for t in trailers) or "none arrived"
    said = "HTTP trailers, which mitmproxy cannot relay: the client was sent an error instead"
    return f"The answer has {said} (trailers: {fields})" + (f"; {error}" if error else "")


class Relay:
    """The loopback server and its table of one-use tokens."""

    def __init__(
        self,
        sink: Callable[[StreamChunk | ResponseRecord], object],
        *,
        grace: float,
        tls: Callable[[], ssl.SSLContext],
    ) -> None:
        self.sink = sink
        self.grace = grace
        self.tls = tls
        self.port = 0
        self._jobs: dict[str, RelayJob] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=HEAD_MAX)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        """Stop listening; relays still reading are cut and record what they have as `partial`."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)

    async def drain(self, timeout: float) -> None:
        """Wait (up to `timeout`) for relays still reading after their client left."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    def register(self, job: RelayJob) -> str:
        """A token for the request's header that tells the relay where it goes."""
        token = secrets.token_hex(16)
        self._jobs[token] = job
        return token

    def forget(self, token: str) -> None:
        self._jobs.pop(token, None)

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            buf = b""
            while True:
                head_raw, buf = await _read_head(down_r, buf)
                if head_raw is None:
                    return
                head = parse_wire_head(head_raw)
                token = head.get(TOKEN_HEADER.encode())
                job = self._jobs.pop(token.decode("latin-1"), None) if token else None
                if job is None:
                    down_w.write(
                        b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    await down_w.drain()
                    return
                framing = request_body(head)
                raw = bytearray(remove_fields(head_raw, frozenset({TOKEN_HEADER.lower().encode()})))
                while True:
                    _, wire, buf = _split(framing, buf)
                    raw += wire
                    if framing.done:
                        break
                    buf = await down_r.read(65536)
                    if not buf:
                        return
                keep = await self._exchange(job, bytes(raw), down_r, down_w)
                if not keep:
                    return
        except (HeadError, FramingError, ConnectionError, asyncio.IncompleteReadError) as e:
            log.debug("relay connection ended: %s", e)
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                down_w.close()

    async def _exchange(
        self, job: RelayJob, request: bytes, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter
    ) -> bool:
        """Send one request upstream and relay its answer; False when the connection must end."""
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection(
                    job.host,
                    job.port,
                    ssl=self.tls() if job.scheme == "https" else None,
                    server_hostname=(job.sni or job.host) if job.scheme == "https" else None,
                    limit=HEAD_MAX,
                ),
                CONNECT_TIMEOUT,
            )
        except (OSError, ssl.SSLError, TimeoutError) as e:
            error = f"Cannot connect to {job.host}:{job.port}: {e or type(e).__name__}"
            self.sink(self._record(job, None, b"", error=error, partial=False))
            body = error.encode()
            down_w.write(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            await down_w.drain()
            return False
        try:
            up_w.write(request)
            await up_w.drain()
            return await self._answer(job, up_r, down_r, down_w)
        finally:
            up_w.close()

    async def _answer(
        self,
        job: RelayJob,
        up_r: asyncio.StreamReader,
        down_r: asyncio.StreamReader,
        down_w: asyncio.StreamWriter,
    ) -> bool:
        loop = asyncio.get_running_loop()
        status: int | None = None
        head = b""
        parsed: Head | None = None
        down_alive = True
        complete = False
        error: str | None = None
        deadline: float | None = None
        times: list[float | None] = [None, None, None]  # first byte, last byte, first body chunk
        gone: asyncio.Task[bytes] = asyncio.ensure_future(down_r.read(1))
        reading: asyncio.Task[bytes] | None = None
        try:
            while True:  # skip interim (1xx) answers, forwarding them
                head_raw, rest = await _read_head(up_r, b"")
                times[0] = times[0] or time.time()
                if head_raw is None:
                    error = "Server disconnected before answering."
                    self.sink(self._record(job, None, b"", error=error, partial=False))
                    return False
                parsed = parse_wire_head(head_raw)
                if parsed.get(b"trailer") is not None:  # mitmproxy cannot relay trailers: the client
                    down_alive, deadline = False, loop.time() + self.grace  # would wait for ever
                    down_w.close()  # so it gets an error now, and the answer is read to its end
                elif down_alive:
                    down_w.write(head_raw)
                if not parsed.start[1].startswith(b"1") or parsed.start[1] == b"101":
                    break
            head, status = head_raw, int(parsed.start[1])
            framing = response_body(parsed, job.method)
            coding = (parsed.get(b"content-encoding") or b"").decode("latin-1")
            data = rest
            while True:
                if data:
                    body, wire, _ = _split(framing, data)
                    if body:
                        times[2] = times[2] or time.time()
                        self.sink(StreamChunk(job.exchange.flow_id, body, coding))
                    if down_alive:
                        try:
                            down_w.write(wire)
                            await down_w.drain()
                        except ConnectionError:
                            down_alive, deadline = False, loop.time() + self.grace
                if framing.done:
                    complete, times[1] = True, time.time()
                    break
                timeout = None if deadline is None else deadline - loop.time()
                if timeout is not None and timeout <= 0:
                    error = f"Client disconnected; stopped reading after {self.grace:g} s."
                    break
                if reading is None:
                    reading = asyncio.ensure_future(up_r.read(65536))
                waiting: set[asyncio.Future[bytes]] = {reading}
                if down_alive:
                    waiting.add(gone)
                done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if down_alive and gone in done:
                    down_alive, deadline = False, loop.time() + self.grace
                if reading in done:
                    data, reading = reading.result(), None
                    if not data:
                        complete = isinstance(framing, UntilClose)
                        times[1] = time.time() if complete else None
                        if not complete:
                            error = "Server closed the connection before the answer was complete."
                        break
                else:
                    data = b""
        except asyncio.CancelledError:
            error = "The proxy stopped while the answer was being read."
            raise
        except (ConnectionError, HeadError, FramingError, ssl.SSLError) as e:
            error = f"{type(e).__name__}: {e}"
        finally:
            for pending in (gone, reading):
                if pending is not None and not pending.done():
                    pending.cancel()
            trailers = getattr(framing, "trailers", None) if status is not None else None
            if trailers or (parsed is not None and parsed.get(b"trailer") is not None and status is not None):
                error = trailer_error(trailers or [], error)
            if status is not None:
                # `complete` is about the answer, not the client: an SDK that stops at `[DONE]` and
                # closes before the last chunk's terminator still had the whole answer read for it.
                if not complete and error is None:
                    error = "Client disconnected." if not down_alive else "The answer was cut short."
                self.sink(self._record(job, status, head, error=error, partial=not complete, times=times))
        return down_alive and complete and framing.consumed_all

    def _record(
        self,
        job: RelayJob,
        status: int | None,
        head: bytes,
        *,
        error: str | None,
        partial: bool,
        times: list[float | None] | None = None,
    ) -> ResponseRecord:
        parsed = parse_wire_head(head) if head else None
        return ResponseRecord(
            exchange=job.exchange,
            at=time.time(),
            status=status,
            head=head,
            body=None,
            content_type=(parsed.get(b"content-type") or b"").decode("latin-1") if parsed else "",
            content_encoding=(parsed.get(b"content-encoding") or b"").decode("latin-1") if parsed else "",
            error=error,
            streamed=status is not None,
            partial=partial,
            request_body=job.request_body,
            timing=(job.started, *(times or (None, None, None))),
        )
