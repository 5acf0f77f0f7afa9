"""One proxy per FLIGHTLOG_HOME: `proxy.lock`, held by the proxy from before it starts until it exits.

A second `flightlog proxy` on a home whose proxy runs (or is still starting: the lock is taken
before mitmproxy loads, seconds before `proxy.json` is written) is refused in one line naming the
one there, its pid and where it listens; two proxies would each think they own `proxy.json`, and
`flightlog run` and `env` would route through whichever wrote last. The lock is a POSIX record lock
(`fcntl`): the kernel drops it when the process ends, however it ends, so a crashed proxy never
leaves a home locked. The file holds the owner's pid and `--listen` as it was given, for the
refusal's line; whether anyone holds it is asked with F_GETLK, which takes nothing (asking by
taking it, even for a moment, could refuse a proxy starting at that very moment).

A proxy with its own state file (a sealed command's, `--state-file`) has its own lock beside it.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from addons.proxy_env import STATE_FILE
from flightlog.errors import CommandError

LOCK_FILE: Final = "proxy.lock"
_FLOCK: Final = "hhqqi4x"
"""Linux's `struct flock`: type, whence, start, length, pid (and the padding of its alignment)."""
_held: list[int] = []
"""The descriptors of the locks this process holds (closing one would release it)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """The proxy holding a home's lock: its pid and `--listen` as given."""

    pid: int
    listen: str


def lock_path(home: Path, state_file: str = STATE_FILE) -> Path:
    """`proxy.lock` for the home's proxy; `NAME.lock` beside another state file `NAME.json`."""
    if state_file == STATE_FILE:
        return home / LOCK_FILE
    return home / f"{Path(state_file).stem}.lock"


def take(home: Path, listen: str, state_file: str = STATE_FILE) -> None:
    """Hold the home's lock until this process exits; a proxy already holding it is one clear error."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(home, state_file), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        found = holder(home, state_file)
        raise CommandError(refusal(home, found)) from None
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": os.getpid(), "listen": listen}).encode())
    _held.append(fd)
    if state_file != STATE_FILE:  # a name of this process's own (`sealed-PID.json`): no one else opens it
        atexit.register(lock_path(home, state_file).unlink, missing_ok=True)


def refusal(home: Path, found: Holder | None) -> str:
    """The one line a second proxy on `home` is refused with."""
    who = f"pid {found.pid}, --listen {found.listen}" if found is not None else "its pid unknown"
    return (
        f"a proxy is already running for {home} ({who}), or starting: use it (flightlog env, "
        "flightlog run -- COMMAND), stop it, or give this one another FLIGHTLOG_HOME"
    )


def holder(home: Path, state_file: str = STATE_FILE) -> Holder | None:
    """The proxy holding the home's lock (running or starting), or None when none does."""
    path = lock_path(home, state_file)
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, query))
        if kind == fcntl.F_UNLCK:
            return None
        try:
            said = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            said = {}
        return Holder(pid, str(said.get("listen", "?")) if said.get("pid") == pid else "?")
    finally:
        os.close(fd)
