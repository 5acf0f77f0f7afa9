"""The writer process: `python -m recording.writer.child`, started by `WriterProcess`, fed on stdin.

It reads frames (`pipe_frames.read_frame`) and hands their records to a `Writer`, whose thread
redacts, reads usage, hashes, compresses and appends batches exactly as it would inside the proxy.
It never imports mitmproxy. SIGINT and SIGTERM are ignored: the proxy decides when writing ends, by
sending `stop` and closing the pipe, or by dying (end of file). Either way what is queued is drained.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _name_process() -> None:
    """`ps`, `top` and the bench see `flightlog-writer` (its argv), not a second python."""
    from recording.os_names import name_os_thread

    name_os_thread(b"flightlog-writer")


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("flightlog")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _ack_writer() -> Callable[[int], None]:
    """Acknowledgements to the proxy on stdout (`ACK`: the frame number through which all is settled),
    from whichever thread settles last; a proxy that is gone (EPIPE) needs none."""
    import os
    import threading

    from recording.writer.pipe_frames import ACK

    lock = threading.Lock()

    def ack(number: int) -> None:
        with lock, contextlib.suppress(OSError):
            os.write(1, ACK.pack(number))

    return ack


OPEN_WAIT = 5.0
"""Seconds the start waits for the Ledger to open (its migration check) before saying ready."""


def _opened_first(spec: Any, open_ledger: Callable[..., Any]) -> Callable[[float], Any]:
    """The writer's Ledger opener, with the Ledger opened now (up to OPEN_WAIT): the proxy listens
    once this process is ready, and the first answers' commits must not wait for the migration check
    (bench.capture counted it in the commit delay's p99). A Ledger that is down or slow is opened
    later by the writer, as before."""
    opened: list[Any] = []

    def first(retry: float) -> None:
        with contextlib.suppress(Exception):
            opened.append(open_ledger(spec.ledger_url, spec.blobs_url, retry_seconds=retry))

    thread = threading.Thread(target=first, args=(2.0,), name="flightlog-open", daemon=True)
    thread.start()
    thread.join(OPEN_WAIT)

    def opener(retry: float) -> Any:
        return opened.pop() if opened else open_ledger(spec.ledger_url, spec.blobs_url, retry_seconds=retry)

    return opener


def _journal(spec: Any, run: str, put: Callable[[Any], None]) -> int | None:
    """This run's journal, held (a lock that says this writer lives), and, in a thread, the journals
    of the collector's dead runs settled (`recording.writer.lost`); None when no journal is kept."""
    if not spec.journal:
        return None
    from recording.writer.lost import settle_left_behind
    from recording.writer.risk_journal import hold, journal_path

    folder = Path(spec.journal)
    args = (folder, spec.collector, run, spec.ledger_url, spec.blobs_url, put)
    threading.Thread(target=settle_left_behind, args=args, name="flightlog-settle", daemon=True).start()
    return hold(journal_path(folder, spec.collector, run))


def _settle_own(spec: Any, run: str, lock: int | None, told: bool, open_ledger: Callable[..., Any]) -> None:
    """After the drain: a proxy that died (the pipe ended without `stop`) may have answered exchanges
    whose records never reached the pipe; its journal says which, and what the Ledger lacks of them is
    filed now, by a writer of its own (the drained one has stopped)."""
    import os

    from recording.events import Processing
    from recording.writer.lost import settle
    from recording.writer.risk_journal import journal_path
    from recording.writer.thread import Writer

    path = journal_path(Path(spec.journal), spec.collector, run)
    if not told:
        late = Writer(
            lambda retry: open_ledger(spec.ledger_url, spec.blobs_url, retry_seconds=retry),
            Processing(),
            collector=spec.collector,
        )
        late.start()
        settle(path, spec.collector, spec.ledger_url, spec.blobs_url, late.put_event)
        late.stop(timeout=spec.drain_timeout)
    if lock is not None:
        os.close(lock)


def _publisher(spec: Any, open_ledger: Callable[..., Any]) -> Any:
    """The checkpoints' thread (`storage.witness.publisher`), started; None without witnesses."""
    if not spec.witnesses:
        return None
    from storage.witness.publisher import Publisher

    publisher = Publisher(
        lambda: open_ledger(spec.ledger_url, spec.blobs_url, retry_seconds=2.0),
        spec.witnesses,
        spec.collector,
        spec.checkpoint_interval,
    )
    publisher.start()
    return publisher


def main() -> int:
    """Write until told to stop or the pipe ends; 2 if the first frame is not a start."""
    _name_process()
    _log_to_stderr()
    # deferred until the process is named: these load SQLAlchemy, which takes a while
    from recording.capture_setup import write_stats
    from recording.records import from_wire, size_of
    from recording.writer.acks import FrameAcks
    from recording.writer.pipe_frames import READY, read_frame
    from recording.writer.pipe_reader import polling_stdin
    from recording.writer.process import WriterSpec
    from recording.writer.stats import ProxyDrops
    from recording.writer.thread import Writer
    from storage.ledger import open_ledger

    stream = polling_stdin()
    started = read_frame(stream)
    first = started[0] if started is not None else None
    if first is None or first[0] != "start" or not isinstance(first[1], WriterSpec):
        print("flightlog: the writer process expects to be started by the proxy", file=sys.stderr)
        return 2
    spec: WriterSpec = first[1]
    run: str = first[3]
    writer = Writer(
        _opened_first(spec, open_ledger),
        first[2],
        collector=spec.collector,
        flush_interval=spec.flush_interval,
        keep_delays=bool(spec.stats_file),
    )
    writer.acks = FrameAcks(_ack_writer())
    if first[2].prices is not None:
        first[2].prices.warm()  # the price library loads before READY, not on the first model answer
    writer.start()
    gc.freeze()  # the imported modules live as long as we do: full collections need not walk them
    with contextlib.suppress(OSError):  # a proxy gone already (EPIPE): what it sent is still drained
        sys.stdout.buffer.write(READY)  # imports are done and frames are read from now on
        sys.stdout.buffer.flush()
    journal = _journal(spec, run, writer.put_event)
    publisher = _publisher(spec, open_ledger)
    drain, told = spec.drain_timeout, False
    while (framed := read_frame(stream)) is not None:
        message, buffers = framed
        kind = message[0]
        if kind == "items":
            _, wires, number, dropped, reported = message
            # The drops at the proxy's bound are one more thing the frame holds: settled by their own
            # overflow event, whose id (the proxy's run and this frame) makes a second delivery a no-op.
            writer.acks.open(number, len(wires) + (1 if dropped else 0))
            for wire in wires:
                item = from_wire(wire, buffers)
                writer.wait_for_room(size_of(item))  # backpressure: the pipe fills, the proxy reads slower
                writer.put(item, number)
            if dropped:
                writer.put_proxy_drops(ProxyDrops(run, number, int(dropped), reported))
        elif kind == "processing":
            writer.processing = message[1]
        elif kind == "dropped":
            writer.count_dropped(int(message[1]))
        elif kind == "stop":
            drain, told = float(message[1]), True
            break
    writer.stop(timeout=drain)
    if publisher is not None:
        publisher.stop(timeout=drain)  # the last checkpoint covers everything drained
    if journal is not None:
        _settle_own(spec, run, journal, told, open_ledger)
    if spec.stats_file:
        write_stats(Path(spec.stats_file), writer)
    return 0


if __name__ == "__main__":
    # First, before the imports that take half a second: a signal arriving now must not kill us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(main())
