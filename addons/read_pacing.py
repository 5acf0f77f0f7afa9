"""mitmproxy's reads wait for the writer when it is behind (`recording.writer.pacing`).

mitmproxy reads each connection in a loop that, after handing the bytes read to its layers, awaits
`ConnectionHandler.drain_writers()` (its own backpressure: it reads no more until what it wrote is
taken). That await is the one place a read can wait without blocking the event loop, so the proxy's
`drain_writers` also awaits the writer's room. One proxy process has one writer: the hook asks
whichever `room` was installed last, and does nothing once it is removed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Room = Callable[[], Awaitable[None] | None]
_room: list[Room] = []


def install(room: Room) -> None:
    """From now on every connection's read waits on `room()` after its own drain."""
    from mitmproxy.proxy import server

    handler: Any = server.ConnectionHandler
    if not getattr(handler.drain_writers, "flightlog_paced", False):
        handler.drain_writers = _paced(handler.drain_writers)
    _room[:] = [room]


def remove(room: Room) -> None:
    """Reads no longer wait on `room` (the writer stops)."""
    if _room and _room[0] == room:
        _room.clear()


def _paced(drain: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    async def drain_writers(self: Any) -> None:
        await drain(self)
        if _room and (wait := _room[0]()) is not None:
            await wait

    drain_writers.flightlog_paced = True  # type: ignore[attr-defined]
    return drain_writers
