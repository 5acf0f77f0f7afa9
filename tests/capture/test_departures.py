"""A client's end is held from mitmproxy exactly while an answer on its connection is arriving.

Real sockets (a socket pair) and asyncio streams; a stand-in for mitmproxy's flow is an object with
a `response` attribute, which is all `ClientConnection` reads of it.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from addons.wire.departures import ClientConnection, Departures, HeldReader, HeldWriter


@dataclass
class Exchange:
    response: object | None = None


async def _pair(grace: float) -> tuple[HeldReader, HeldWriter, ClientConnection, socket.socket]:
    ours, client = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    connection = ClientConnection(("127.0.0.1", 1), grace)
    return HeldReader(reader, connection), HeldWriter(writer, connection), connection, client


def test_an_end_with_no_answer_arriving_passes_at_once() -> None:
    """No exchange, or one whose answer's head has not come: mitmproxy hears the end at once (as
    plain mitmdump would), and the connection does not count as a client that left mid-answer."""

    async def run() -> None:
        reader, _, connection, client = await _pair(grace=5)
        connection.begin("a", Exchange(response=None))
        client.close()
        assert await asyncio.wait_for(reader.read(100), 1) == b""
        assert connection.left_at is not None and not connection.expired

    asyncio.run(run())


def test_an_end_while_an_answer_arrives_waits_for_its_end() -> None:
    """The answer's head came: the end waits until the exchange ends, writes for the gone client are
    dropped, and when it left is kept."""

    async def run() -> None:
        reader, writer, connection, client = await _pair(grace=5)
        connection.begin("a", Exchange(response=object()))
        client.close()
        reading = asyncio.ensure_future(reader.read(100))
        await asyncio.sleep(0.2)
        assert not reading.done(), "the end reached mitmproxy while the answer was arriving"
        assert connection.gone
        writer.write(b"more of the answer")  # dropped, not an error
        await writer.drain()
        assert not writer.is_closing()
        connection.end("a")
        assert await asyncio.wait_for(reading, 1) == b""
        assert not connection.expired
        writer.close()

    asyncio.run(run())


def test_the_grace_bounds_the_wait() -> None:
    """An answer that does not end within the grace: the end is passed on then, marked expired."""

    async def run() -> None:
        reader, _, connection, client = await _pair(grace=0.3)
        connection.begin("a", Exchange(response=object()))
        client.close()
        assert await asyncio.wait_for(reader.read(100), 2) == b""
        assert connection.expired

    asyncio.run(run())


def test_release_all_passes_every_held_end_on() -> None:
    """A stopping proxy releases every held connection at once."""

    async def run() -> None:
        departures = Departures(grace=30)
        reader, _, connection, client = await _pair(grace=30)
        departures.connections[connection.peer] = connection
        connection.begin("a", Exchange(response=object()))
        client.close()
        reading = asyncio.ensure_future(reader.read(100))
        await asyncio.sleep(0.1)
        departures.release_all()
        assert await asyncio.wait_for(reading, 1) == b""

    asyncio.run(run())
