"""Who holds a TCP port, for the line that says a port is taken: a flightlog proxy is named as one
(its pid and FLIGHTLOG_HOME), another program by its pid and command line.

Linux only (`/proc/net/tcp*` gives the listening socket's inode, `/proc/PID/fd` the process that
has it open); a process of another user is not readable, and then the line says only that the port
is in use. Read on the error path only: walking every process's descriptors costs a moment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
"""A listening socket's state in /proc/net/tcp."""


@dataclass(frozen=True, slots=True)
class PortOwner:
    pid: int
    command: str
    home: str | None
    """Its FLIGHTLOG_HOME when it is a flightlog process (else None)."""

    @property
    def flightlog(self) -> bool:
        return "flightlog" in self.command


def _listening_inodes(port: int, proc: Path) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _home_of(pid_dir: Path) -> str | None:
    try:
        environ = (pid_dir / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in environ:
        if item.startswith(b"FLIGHTLOG_HOME="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def owner(port: int, proc: Path = Path("/proc")) -> PortOwner | None:
    """The process listening on `port` (the lowest pid of those sharing it), if one can be seen."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids = sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit())
    for pid in pids:
        pid_dir = proc / str(pid)
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link in wanted:
                try:
                    raw = (pid_dir / "cmdline").read_bytes()
                except OSError:
                    raw = b""
                command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
                home = _home_of(pid_dir) if "flightlog" in command else None
                if "flightlog" in command and home is None:
                    home = "~/.flightlog"
                return PortOwner(pid, command, home)
    return None


def taken_line(port: int, what: str, fix: str) -> str:
    """'port 8080 (--listen) is taken by ...: FIX' with whoever holds it named."""
    found = owner(port)
    if found is None:
        who = "is in use"
    elif found.flightlog:
        who = f"is taken by a flightlog proxy (pid {found.pid}, FLIGHTLOG_HOME {found.home})"
        fix = "use it (FLIGHTLOG_HOME=... flightlog env), stop it, or " + fix
    else:
        who = f"is taken by pid {found.pid} ({found.command[:80]})"
    return f"port {port} {what} {who}: {fix}"
