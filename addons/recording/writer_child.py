"""The writer process: `python -m addons.recording.writer_child`, started by `WriterProcess`, fed on stdin.

It reads frames (`writer_process.read_frame`) and hands their records to a `Writer`, whose thread
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
from collections.abc import Callable
from pathlib import Path


def _name_process() -> None:
    """`ps`, `top` and the bench see `flightlog-writer`, not a second python."""
    import contextlib
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(15, b"flightlog-writer", 0, 0, 0)  # PR_SET_NAME


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

    from addons.recording.writer_process import ACK

    lock = threading.Lock()

    def ack(number: int) -> None:
        with lock, contextlib.suppress(OSError):
            os.write(1, ACK.pack(number))

    return ack


def main() -> int:
    """Write until told to stop or the pipe ends; 2 if the first frame is not a start."""
    _name_process()
    _log_to_stderr()
    # deferred until the process is named: these load SQLAlchemy, which takes a while
    from addons.recording.acks import FrameAcks
    from addons.recording.capture_setup import write_stats
    from addons.recording.records import from_wire
    from addons.recording.writer import Writer
    from addons.recording.writer_process import READY, WriterSpec, read_frame
    from storage.ledger import open_ledger

    stream = sys.stdin.buffer
    started = read_frame(stream)
    first = started[0] if started is not None else None
    if first is None or first[0] != "start" or not isinstance(first[1], WriterSpec):
        print("flightlog: the writer process expects to be started by the proxy", file=sys.stderr)
        return 2
    spec: WriterSpec = first[1]
    writer = Writer(
        lambda retry: open_ledger(spec.ledger_url, spec.blobs_url, retry_seconds=retry),
        first[2],
        collector=spec.collector,
        flush_interval=spec.flush_interval,
    )
    writer.acks = FrameAcks(_ack_writer())
    writer.start()
    gc.freeze()  # the imported modules live as long as we do: full collections need not walk them
    with contextlib.suppress(OSError):  # a proxy gone already (EPIPE): what it sent is still drained
        sys.stdout.buffer.write(READY)  # imports are done and frames are read from now on
        sys.stdout.buffer.flush()
    drain = spec.drain_timeout
    while (framed := read_frame(stream)) is not None:
        message, buffers = framed
        kind = message[0]
        if kind == "items":
            _, wires, number, dropped = message
            writer.stats.dropped += int(dropped)  # at the proxy's bound: the overflow event records them
            writer.acks.open(number, len(wires))
            for wire in wires:
                writer.put(from_wire(wire, buffers), number)
        elif kind == "processing":
            writer.processing = message[1]
        elif kind == "dropped":
            writer.stats.dropped += int(message[1])
        elif kind == "stop":
            drain = float(message[1])
            break
    writer.stop(timeout=drain)
    if spec.stats_file:
        write_stats(Path(spec.stats_file), writer)
    return 0


if __name__ == "__main__":
    # First, before the imports that take half a second: a signal arriving now must not kill us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(main())
