"""Names the OS shows for flightlog's threads, so `ps`, `top -H` and the benches can tell them apart."""

from __future__ import annotations

import contextlib


def name_os_thread(name: bytes) -> None:
    """Name the calling OS thread (Linux's PR_SET_NAME: 15 bytes kept); elsewhere nothing happens.
    Naming the main thread names the process as `ps` and `top` list it."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(15, name[:15], 0, 0, 0)  # PR_SET_NAME
