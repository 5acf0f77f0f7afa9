"""A client that leaves does not cut the answer it was getting: mitmproxy hears of the leaving later.

mitmproxy closes the upstream connection the moment a client's connection ends (its HTTP layer turns
the client's end into an error for the upstream side, with no hook in between), so an answer still
arriving would be lost with the client. Rather than a second HTTP stack owning the upstream socket
(with its own parser, its own TLS and its own idea of where an answer ends), the client's side is
where flightlog steps in: every TCP listener hands mitmproxy the client's stream through `Departures`
(`addons.listening`), and while an answer on that connection is still arriving (its head came, its
end has not: `in_flight`), the end of the client's stream (end of file, a reset, a failed write) is
held back from mitmproxy. mitmproxy goes on reading the answer exactly as it would have (the tee
records it), what it writes for the client is dropped, and the end is passed on once the answer has
ended or `grace` seconds have passed. What the client got is known: the bytes passed on before
`left_at`. With no answer arriving, the end is passed on at once, as plain mitmdump would see it.

Stated limits: an HTTP/2 client that resets one stream and keeps its connection is not a departure
here (mitmproxy resets the upstream stream at once); UDP listeners (HTTP/3) are not wrapped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from storage.configuration import default


class Answering(Protocol):
    """What a connection knows of an exchange in flight: whether its answer's head has come."""

    @property
    def response(self) -> object | None: ...


class ClientConnection:
    """One client connection: its exchanges in flight, and when (if) the client left."""

    __slots__ = ("_released", "expired", "grace", "in_flight", "left_at", "peer")

    def __init__(self, peer: tuple[Any, ...], grace: float) -> None:
        self.peer = peer
        self.grace = grace
        self.in_flight: dict[str, Answering] = {}
        self.left_at: float | None = None
        """When the client's stream ended (epoch seconds) while exchanges were in flight."""
        self.expired = False
        """The grace ran out before every answer had ended."""
        self._released: asyncio.Event | None = None

    @property
    def gone(self) -> bool:
        return self.left_at is not None

    def answering(self) -> bool:
        """Whether an answer on this connection is arriving: its head came, its end has not."""
        return any(exchange.response is not None for exchange in self.in_flight.values())

    def begin(self, key: str, exchange: Answering) -> None:
        self.in_flight[key] = exchange

    def end(self, key: str) -> None:
        """An exchange ended (answered or failed): once none is arriving, the end is passed on."""
        self.in_flight.pop(key, None)
        if self._released is not None and not self.answering():
            self._released.set()

    def release(self) -> None:
        """Pass the end on now (the proxy is stopping)."""
        if self._released is not None:
            self._released.set()

    async def leave(self) -> None:
        """The client's stream ended: note when, and return once mitmproxy may hear of it."""
        if self.left_at is None and self.in_flight:
            self.left_at = time.time()
        if not self.answering():
            return
        self._released = asyncio.Event()
        try:
            await asyncio.wait_for(self._released.wait(), self.grace)
        except TimeoutError:
            self.expired = True


class HeldReader:
    """The client's `StreamReader` as mitmproxy reads it: its end waits for `ClientConnection.leave`."""

    def __init__(self, reader: asyncio.StreamReader, connection: ClientConnection) -> None:
        self._reader = reader
        self._connection = connection

    async def read(self, n: int = -1) -> bytes:
        try:
            data = await self._reader.read(n)
        except OSError:
            if not self._connection.answering():
                raise
            data = b""
        if not data:
            await self._connection.leave()
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


class HeldWriter:
    """The client's `StreamWriter` as mitmproxy writes to it: once the client left with an answer
    arriving, writes are dropped and a failed write is a leaving, not mitmproxy's error."""

    def __init__(self, writer: asyncio.StreamWriter, connection: ClientConnection) -> None:
        self._writer = writer
        self._connection = connection

    def write(self, data: bytes) -> None:
        if not self._connection.gone:
            self._writer.write(data)

    def write_eof(self) -> None:
        if not self._connection.gone:
            self._writer.write_eof()

    def is_closing(self) -> bool:
        return False if self._connection.gone else self._writer.is_closing()

    async def drain(self) -> None:
        if self._connection.gone:
            return
        try:
            await self._writer.drain()
        except OSError:
            if not self._connection.answering():
                raise
            if self._connection.left_at is None:
                self._connection.left_at = time.time()

    def close(self) -> None:
        self._writer.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._writer.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


Handler = Callable[[Any, Any], Awaitable[None]]


class Departures:
    """Every client connection of the listeners it wraps, by the client's address (mitmproxy's
    `client_conn.peername` for the same socket)."""

    def __init__(self, grace: float = default("stream_grace")) -> None:
        self.grace = grace
        self.connections: dict[tuple[Any, ...], ClientConnection] = {}

    def wrap(self, handle: Handler) -> Handler:
        """`handle(reader, writer)` (mitmproxy's `handle_stream`) with the client's stream held."""

        async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            if not isinstance(peer, tuple):  # not a socket with an address: nothing to key it by
                await handle(reader, writer)
                return
            connection = self.connections[peer] = ClientConnection(peer, self.grace)
            try:
                await handle(HeldReader(reader, connection), HeldWriter(writer, connection))
            finally:
                if self.connections.get(peer) is connection:
                    del self.connections[peer]

        return held

    def of(self, peer: tuple[Any, ...] | None) -> ClientConnection | None:
        return self.connections.get(peer) if peer is not None else None

    def release_all(self) -> None:
        """The proxy is stopping: every held end is passed on now."""
        for connection in list(self.connections.values()):
            connection.release()
