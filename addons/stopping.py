"""Stopping without losing an answer: no answer goes out once its record could not be kept.

mitmproxy's `done` hooks run while it still listens and still serves the connections it has; the
writer, told to stop there, drops what is put after (it can no longer promise to write it): under
load, exchanges answered through the drain were recorded nowhere and counted nowhere. So a stop
runs in this order:

1. the listeners close (no new connection; with `--workers` the kernel hands new ones to the others);
2. the proxy is `closing`: a request that arrives now on a kept-alive connection is refused before
   it goes upstream (its connection closed, no answer) and recorded as refused;
3. answers read on for clients that left are cut (recorded partial);
4. the exchanges in flight get `STOP_WAIT` seconds to end, each recorded as it does;
5. those still running are cut by closing their client's connection: mitmproxy then ends each with
   its `error` hook, and each is recorded (partial) while the writer still runs;
6. only then does the writer stop (and drain). From there an answer whose record cannot be kept is
   killed instead of sent (`Capture.response`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from addons.wire.departures import Departures

if TYPE_CHECKING:
    from mitmproxy import http

STOP_WAIT = 5.0
"""Seconds the exchanges in flight at a stop have to end by themselves."""
CUT_WAIT = 2.0
"""Seconds the exchanges cut at a stop have for mitmproxy to end them (their `error` hooks)."""
META_CUT = "flightlog.cut"
"""In a flow's metadata: the stopping proxy cut it (its client's connection closed)."""


class InFlight:
    """The exchanges between their request and the end of their answer."""

    def __init__(self) -> None:
        self.flows: dict[str, http.HTTPFlow] = {}
        self.closing = False

    def begin(self, flow: http.HTTPFlow) -> None:
        self.flows[flow.id] = flow

    def end(self, flow: http.HTTPFlow) -> None:
        self.flows.pop(flow.id, None)

    async def _ended(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.flows and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return not self.flows


async def stop_serving(
    server: Any, in_flight: InFlight, departures: Departures, wait: float = STOP_WAIT
) -> int:
    """Steps 1-5 of the module's order; the number of exchanges that had to be cut."""
    if server is not None:
        await server.servers.update([])
    in_flight.closing = True
    departures.release_all()
    if await in_flight._ended(wait):
        return 0
    cut = list(in_flight.flows.values())
    for flow in cut:
        flow.metadata[META_CUT] = True
        _close_client(server, flow)
    await in_flight._ended(CUT_WAIT)
    return len(cut)


def _close_client(server: Any, flow: http.HTTPFlow) -> None:
    """End the client's side of `flow` as a client that left would (mitmproxy's own connection
    handler, cancelled), so mitmproxy ends the exchange through its `error` hook."""
    handler = getattr(server, "connections", {}).get(flow.client_conn.id)
    io = getattr(handler, "transports", {}).get(flow.client_conn) if handler is not None else None
    task = getattr(io, "handler", None)
    if task is not None:
        task.cancel("the proxy is stopping")
