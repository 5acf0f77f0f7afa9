"""Plays a recorded streamed answer chunk by chunk, from inside the serve-replay process.

An answer set in mitmproxy's `request` hook leaves in one piece. To serve an SSE answer event by event
(optionally paced), serve-replay instead points the flow at this player: a loopback HTTP/1.1 server
on mitmproxy's own event loop that answers the request carrying a one-time token with the recorded
head and then each recorded chunk, flushed separately. mitmproxy streams it to the client as it
arrives. The player only ever answers from memory: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import Final

from readback.recorded import Exchange
from readback.ws_player import Conversation, converse
from storage.heads import END_OF_HEAD, Fields, build_head

LONGEST_PACE: Final = 60.0

TOKEN: Final = "X-Flightlog-Replay-Token"


def recorded_duration(exchange: Exchange) -> float:
    """Seconds from the request to the end of its recorded answer (0 when unknown), at most a minute.

    The Ledger keeps when a request started and when its answer ended, not when each chunk came, so
    "recorded timing" spreads a stream's chunks evenly over that span.
    """
    if exchange.response is None:
        return 0.0
    took = (exchange.response.at - exchange.request.at).total_seconds()
    return min(max(took, 0.0), LONGEST_PACE)


@dataclass(frozen=True, slots=True)
class Playback:
    """One answer to play: status line parts, header fields (framing left to the player), chunks, pace."""

    status: int
    reason: bytes
    fields: Fields
    chunks: tuple[bytes, ...]
    delay: float = 0.0

    def head(self) -> bytes:
        """The status line and fields, framed anew: the chunks are sent chunked, whatever was recorded."""
        fields = [
            (n, v) for n, v in self.fields if n.lower() not in (b"content-length", b"transfer-encoding")
        ]
        fields.append((b"Transfer-Encoding", b"chunked"))
        return build_head((b"HTTP/1.1", b"%d" % self.status, self.reason), fields) + END_OF_HEAD


class Player:
    """The loopback server; `put` a playback, send the flow to `address` with the token header."""

    def __init__(self) -> None:
        self.pending: dict[str, Playback | Conversation] = {}
        self.address: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def put(self, playback: Playback | Conversation) -> str:
        token = uuid.uuid4().hex
        self.pending[token] = playback
        return token

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request on the connection; False when the connection is done."""
        head = await reader.readuntil(b"\r\n\r\n")
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        await _drain_body(reader, fields)
        playback = self.pending.pop(fields.get(TOKEN.lower().encode(), b"").decode(), None)
        if playback is None:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return False
        if isinstance(playback, Conversation):
            await converse(head, reader, writer, playback)
            return False
        writer.write(playback.head())
        await writer.drain()
        for i, chunk in enumerate(playback.chunks):
            if i and playback.delay:
                await asyncio.sleep(playback.delay)
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _drain_body(reader: asyncio.StreamReader, fields: dict[bytes, bytes]) -> None:
    """Read and drop the forwarded request body (the answer was chosen before it was sent here)."""
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return
            await reader.readexactly(size + 2)
    length = int(fields.get(b"content-length", b"0") or 0)
    if length:
        await reader.readexactly(length)
