"""Plays a recorded WebSocket conversation back to a live client, from inside serve-replay.

Capture keeps every message of an upgraded connection as an event (`websocket.client` /
`websocket.server`, numbered in order) under the upgrade's action. Replaying it, the player accepts
the live client's upgrade (answering its own key), sends the server's messages that came first, and
after each client message the server messages that followed it in the recording. A client message
that differs from the recorded one is noted (`Conversation.diverged`), and the play goes on in order.
The Ledger does not say whether a message was text or binary: valid UTF-8 is sent as text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from readback.recorded import PayloadReader, body
from storage.events import StoredEvent
from storage.kinds import WEBSOCKET_KINDS


@dataclass(frozen=True, slots=True)
class Message:
    origin: str  # "client" or "server"
    data: bytes
    text: bool


@dataclass
class Conversation:
    """The recorded messages of one connection, in order, and what diverged while playing them."""

    messages: tuple[Message, ...]
    diverged: list[str] = field(default_factory=list)


def conversation(events: Sequence[StoredEvent], read: PayloadReader) -> Conversation | None:
    """The conversation recorded under an upgrade's action (None when it has no messages)."""
    origin = {WEBSOCKET_KINDS["client"]: "client", WEBSOCKET_KINDS["server"]: "server"}

    def index(e: StoredEvent) -> int:
        tail = e.event_id.rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    messages = []
    for e in sorted((e for e in events if e.kind in origin), key=index):
        data = body(e, read)
        messages.append(Message(origin[e.kind], data, bool(e.payload_text) or not data))
    return Conversation(tuple(messages)) if messages else None


async def converse(
    head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, played: Conversation
) -> None:
    """Accept the upgrade in `head` and play the conversation until the client closes."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import (
        AcceptConnection,
        BytesMessage,
        CloseConnection,
        Ping,
        Request,
        TextMessage,
    )
    from wsproto.events import (
        Message as WsMessage,
    )

    ws = WSConnection(ConnectionType.SERVER)
    ws.receive_data(head)
    if not any(isinstance(e, Request) for e in ws.events()):
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        return
    writer.write(ws.send(AcceptConnection()))
    queue = list(played.messages)
    pending: dict[str, list[bytes | str]] = {"text": []}

    def server_turn() -> bytes:
        out = b""
        while queue and queue[0].origin == "server":
            m = queue.pop(0)
            out += ws.send(TextMessage(data=m.data.decode()) if m.text else BytesMessage(data=m.data))
        return out

    writer.write(server_turn())
    await writer.drain()
    while True:
        data = await reader.read(65536)
        if not data:
            return
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, WsMessage):
                pending["text"].append(event.data)
                if not event.message_finished:
                    continue
                parts = pending["text"]
                got = "".join(parts).encode() if isinstance(event, TextMessage) else b"".join(parts)  # type: ignore[arg-type]
                pending["text"] = []
                expected = queue.pop(0) if queue and queue[0].origin == "client" else None
                if expected is None or expected.data != got:
                    recorded = expected.data[:60] if expected else "nothing"
                    played.diverged.append(f"client sent {got[:60]!r}, the recording has {recorded!r}")
                writer.write(server_turn())
            elif isinstance(event, Ping):
                writer.write(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                writer.write(ws.send(event.response()))
                await writer.drain()
                return
        await writer.drain()
