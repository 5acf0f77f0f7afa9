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

What the stop drained is said in one line (`Drained`): the exchanges in flight that ended by
themselves and those cut, the events this run wrote (read back from the Ledger's batches), and what
was lost, if anything. With `--workers` each worker reports its part and the supervisor says the sum.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from addons.flow_notes import CUT
from addons.wire.departures import Departures

if TYPE_CHECKING:
    from mitmproxy import http

    from recording.writer.process import WriterProcess

log = logging.getLogger("flightlog.capture")

STOP_WAIT = 5.0
"""Seconds the exchanges in flight at a stop have to end by themselves."""
CUT_WAIT = 2.0
"""Seconds the exchanges cut at a stop have for mitmproxy to end them (their `error` hooks)."""


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


@dataclass
class Drained:
    """What one stop drained: exchanges in flight that `finished` by themselves or were `cut`
    (recorded partial), events `written` by this run (None: the Ledger could not be read back),
    records the writer never confirmed (`unconfirmed`), items `dropped` at a full queue, and reads
    that waited for a writer behind (`paced`, `recording.writer.pacing`)."""

    finished: int = 0
    cut: int = 0
    written: int | None = 0
    unconfirmed: int = 0
    dropped: int = 0
    paced: int = 0

    def __add__(self, other: Drained) -> Drained:
        written = None if self.written is None or other.written is None else self.written + other.written
        return Drained(
            self.finished + other.finished,
            self.cut + other.cut,
            written,
            self.unconfirmed + other.unconfirmed,
            self.dropped + other.dropped,
            self.paced + other.paced,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Drained:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def line(self) -> str:
        """'flightlog proxy: stopped; drained 3 exchanges in flight (1 cut, recorded partial); 412
        events written this run; nothing lost'."""
        flight = f"drained {self.finished + self.cut} exchanges in flight"
        flight += f" ({self.cut} cut, recorded partial)" if self.cut else ""
        written = "events written unknown (the Ledger could not be read back)"
        if self.written is not None:
            written = f"{self.written} events written this run"
        if self.paced:
            written += f" (reads waited {self.paced} times for the writer to catch up)"
        losses = []
        if self.unconfirmed:
            losses.append(f"{self.unconfirmed} records not confirmed written")
        if self.dropped:
            losses.append(f"{self.dropped} items dropped at a full queue (counted in capture.overflow)")
        return f"flightlog proxy: stopped; {flight}; {written}; {', '.join(losses) or 'nothing lost'}"


async def stop_serving(
    server: Any, in_flight: InFlight, departures: Departures, wait: float = STOP_WAIT
) -> Drained:
    """Steps 1-5 of the module's order; how many exchanges were in flight, and how many were cut."""
    if server is not None:
        await server.servers.update([])
    in_flight.closing = True
    departures.release_all()
    was = len(in_flight.flows)
    if await in_flight._ended(wait):
        return Drained(finished=was)
    cut = list(in_flight.flows.values())
    for flow in cut:
        CUT.put(flow, True)
        _close_client(server, flow)
    await in_flight._ended(CUT_WAIT)
    return Drained(finished=was - len(cut), cut=len(cut))


async def stop_writer(writer: WriterProcess, drained: Drained, timeout: float, since: datetime) -> Drained:
    """Step 6, then what the writer wrote since `since` (its collector's batches) and lost."""
    await writer.stop(timeout=timeout)
    drained.unconfirmed, drained.dropped = writer.unacknowledged, writer.dropped
    drained.paced = writer.pacing.paused
    drained.written = await asyncio.to_thread(
        _written, writer.spec.ledger_url, writer.spec.blobs_url, writer.spec.collector, since
    )
    return drained


def _written(ledger_url: str, blobs_url: str, collector: str, since: datetime) -> int | None:
    # deferred: SQLAlchemy loads with the Ledger, which this process opens only here
    from storage.ledger import open_ledger
    from storage.tally import written_since

    try:
        ledger = open_ledger(ledger_url, blobs_url, retry_seconds=0)
    except Exception as e:  # the Ledger is down: the line says so, the stop goes on
        log.warning("flightlog: cannot read back what this run wrote: %s", str(e).splitlines()[0])
        return None
    try:
        return written_since(ledger.engine, collector, since)
    except Exception as e:
        log.warning("flightlog: cannot read back what this run wrote: %s", str(e).splitlines()[0])
        return None
    finally:
        ledger.close()


def _close_client(server: Any, flow: http.HTTPFlow) -> None:
    """End the client's side of `flow` as a client that left would (mitmproxy's own connection
    handler, cancelled), so mitmproxy ends the exchange through its `error` hook."""
    handler = getattr(server, "connections", {}).get(flow.client_conn.id)
    io = getattr(handler, "transports", {}).get(flow.client_conn) if handler is not None else None
    task = getattr(io, "handler", None)
    if task is not None:
        task.cancel("the proxy is stopping")
