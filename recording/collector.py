"""This proxy's collector id: distinct for two proxies on one host, the same across restarts.

The Ledger orders each collector's batches by position, so two proxies must never share an id
(before, both were `proxy@HOSTNAME`, each with its own `seq`). The default id names the host and a
short digest of the proxy's confdir (its FLIGHTLOG_HOME), and a slot: the first of
`confdir/collectors/N.lock` this process can lock. A proxy restarted alone takes slot 0 again and
so its old id; a second proxy sharing the home meanwhile takes slot 1 (`...#1`), and so on. The
lock is held (an open file) for the life of the process; the operating system drops it on exit,
however the process ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from pathlib import Path
from typing import IO

SLOTS = 64


def default_collector(confdir: Path) -> tuple[str, IO[bytes] | None]:
    """The collector id for a proxy whose confdir is `confdir`, and the lock file to keep open."""
    import fcntl

    where = hashlib.sha256(str(confdir.expanduser().resolve()).encode()).hexdigest()[:8]
    base = f"proxy@{socket.gethostname()}:{where}"
    folder = confdir.expanduser() / "collectors"
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        try:
            handle = (folder / f"{slot}.lock").open("ab")
        except OSError:
            break  # a read-only home: no slots to take, fall back to the process id below
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return (base if slot == 0 else f"{base}#{slot}"), handle
    return f"{base}#pid{os.getpid()}", None
