"""The pipe between the proxy and its writer process: length-prefixed pickles of tuples, and the
child's two answers on its stdout (ready, and acknowledgements).

Only this process's own child reads what is written here, so pickle is safe: nothing else can write
into the pipe.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Sequence
from typing import IO, Any

HEADER = struct.Struct("!II")
SIZE = struct.Struct("!I")
READY = b"R"
"""The child's first byte on its stdout: it has opened what it needs and reads frames."""
ACK = struct.Struct("!Q")
"""The child's acknowledgement on its stdout: every record of every frame up to this number is settled."""


def frame(message: tuple[Any, ...], buffers: Sequence[bytes] = ()) -> list[bytes]:
    """One message as the pieces written to the pipe (only this process's own child reads them).

    `buffers` (large bodies, see `records.to_wire`) follow the pickle as pieces of their own, handed
    to one `writev`: a 100 KiB answer is copied only by the kernel. Layout: the pickle's length, the
    buffer count, each buffer's length, the pickle, the buffers.
    """
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    head = HEADER.pack(len(data), len(buffers)) + b"".join(SIZE.pack(len(b)) for b in buffers)
    return [head, data, *buffers]


def read_frame(stream: IO[bytes]) -> tuple[tuple[Any, ...], list[bytes]] | None:
    """The next message and its buffers, or None at end of file (a frame cut short is the end)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    length, count = HEADER.unpack(head)
    sizes = stream.read(SIZE.size * count)
    data = stream.read(length)
    if len(sizes) < SIZE.size * count or len(data) < length:
        return None
    buffers = []
    for (size,) in SIZE.iter_unpack(sizes):
        buffer = stream.read(size)
        if len(buffer) < size:
            return None
        buffers.append(buffer)
    message = pickle.loads(data)
    return (message, buffers) if isinstance(message, tuple) else None
