"""The door over a WebSocket: `GET /api/dispatch` with `Upgrade: websocket` (the `websocket` form).

Each text message is one canonical call, run as a `POST /api/dispatch` with the same head would be
(the token and who is calling come from the upgrade request), and each reply is one text message, in
order. A message that is not a call gets the door's refusal, recorded like every refusal.

mitmproxy relays a WebSocket between two real connections only, so the door's end is a small server
in the proxy's process: wsproto over asyncio on a loopback port it picks (`WebSocketDoor`). The
proxy's request hook checks the upgrade like every door request (a browser-shaped request from
elsewhere is refused before it gets here), then `admit` files a one-time ticket holding what the
upgrade carried and the flow is pointed at this server with the ticket in a header. The server
accepts only a handshake that brings a ticket it issued, once and within a minute, so a process that
finds the port cannot use it to skip the proxy's checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

TICKET_HEADER: Final = "x-flightlog-ws-ticket"
TICKET_SECONDS: Final = 60.0
MESSAGE_MAX: Final = 1 << 20
"""The largest call a message may hold (1 MiB); a larger one closes the socket with 1009."""

Run = Callable[[str], bytes]
"""One message's call, run by the door: its reply (blocking: it runs off the event loop)."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """What an admitted upgrade carried: how to run its messages, and until when it may be used."""

    run: Run
    expires: float


def is_upgrade(headers: Mapping[str, str]) -> bool:
    """Whether a request asks to become a WebSocket."""
    upgrade = next((v for k, v in headers.items() if k.lower() == "upgrade"), "")
    return upgrade.strip().lower() == "websocket"


class WebSocketDoor:
    """The door's WebSocket end: a loopback server started on first use, and its tickets."""

    def __init__(self) -> None:
        self._tickets: dict[str, Ticket] = {}
        self._server: asyncio.Server | None = None
        self._start = asyncio.Lock()

    async def address(self) -> tuple[str, int]:
        """Where the server listens (started on the first upgrade, in the proxy's event loop)."""
        async with self._start:
            if self._server is None:
                self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            host, port = self._server.sockets[0].getsockname()[:2]
            return str(host), int(port)

    def admit(self, run: Run) -> str:
        """A one-time ticket for one upgrade whose messages `run` answers."""
        now = time.monotonic()
        for key in [k for k, t in self._tickets.items() if t.expires < now]:
            del self._tickets[key]
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = Ticket(run, now + TICKET_SECONDS)
        return ticket

    def _redeem(self, ticket: str | None) -> Ticket | None:
        found = self._tickets.pop(ticket or "", None)
        return found if found is not None and found.expires >= time.monotonic() else None

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        ticket: Ticket | None = None
        parts: list[str] = []
        size = 0
        try:
            while True:
                data = await reader.read(65536)
                ws.receive_data(data or None)
                for event in ws.events():
                    if isinstance(event, Request):
                        given = dict((k.decode().lower(), v.decode()) for k, v in event.extra_headers)
                        ticket = self._redeem(given.get(TICKET_HEADER))
                        if ticket is None:
                            writer.write(ws.send(RejectConnection(status_code=403)))
                            return
                        writer.write(ws.send(AcceptConnection()))
                    elif isinstance(event, TextMessage | BytesMessage) and ticket is not None:
                        chunk = (
                            event.data
                            if isinstance(event.data, str)
                            else event.data.decode("utf-8", "replace")
                        )
                        size += len(chunk)
                        if size > MESSAGE_MAX:
                            writer.write(
                                ws.send(CloseConnection(code=1009, reason="a call is at most 1 MiB"))
                            )
                            return
                        parts.append(chunk)
                        if event.message_finished:
                            message, parts, size = "".join(parts), [], 0
                            reply = await asyncio.to_thread(ticket.run, message)
                            writer.write(ws.send(TextMessage(data=reply.decode("utf-8"))))
                    elif isinstance(event, Ping):
                        writer.write(ws.send(event.response()))
                    elif isinstance(event, CloseConnection):
                        writer.write(ws.send(event.response()))
                        return
                await writer.drain()
                if not data:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, LocalProtocolError, RemoteProtocolError):
            return  # the peer left, or spoke something that is not WebSocket: nothing to answer
        finally:
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
