"""Carry connections from a listening socket to an address, byte for byte, both ways.

A sealed command (`flightlog.sealed`) lives in a network namespace of its own, whose loopback is
its own: the proxy's ports there are listening sockets the namespace made and handed over, and
this relays each connection they accept to the proxy's real port. Nothing is read or changed on
the way (the proxy records what arrives); a side that ends its half is passed on as an end of
file, so a client's shutdown(SHUT_WR) reaches the proxy. `close` ends the connections still open
(the command has exited) without a word.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

CHUNK: Final = 65536


class PortRelay:
    """One listening socket relayed to `target`."""

    def __init__(self, listening: socket.socket, target: tuple[str, int]) -> None:
        self.listening = listening
        self.target = target
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.listening.setblocking(False)
        self.server = await asyncio.start_server(self._accepted, sock=self.listening)

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._carry(reader, writer))
        self.connections.add(task)
        task.add_done_callback(self.connections.discard)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for side in (writer, up_writer):
                with contextlib.suppress(OSError, RuntimeError):
                    side.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()
