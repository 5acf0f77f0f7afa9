"""Carry connections from a listening socket to an address, byte for byte, both ways.

A sealed command (`flightlog.sealed`) lives in a network namespace of its own, whose loopback is
its own: the proxy's ports there are listening sockets the namespace made and handed over, and
this relays each connection they accept to the proxy's real port. Nothing is read or changed on
the way (the proxy records what arrives); a side that ends its half is passed on as an end of
file, so a client's shutdown(SHUT_WR) reaches the proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

CHUNK: Final = 65536


async def serve(listening: socket.socket, target: tuple[str, int]) -> asyncio.Server:
    """Relay every connection `listening` accepts to `target` until the server is closed."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(OSError, RuntimeError):
                    w.close()

    listening.setblocking(False)
    return await asyncio.start_server(handle, sock=listening)


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
