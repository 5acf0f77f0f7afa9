"""Inside a sealed command's namespaces, before the command: the half of `--sealed` that runs there.

Started by `flightlog.sealed` as `python -m flightlog.sealed_child FD` with its plan in the
`FLIGHTLOG_SEALED` variable (JSON), it talks to its parent over the socket FD:

1. leaves the parent's network and mount namespaces (`unshare`; not root: in a user namespace of
   its own that maps only its own user), hides FLIGHTLOG_HOME under an empty tmpfs (the command
   cannot read the Ledger's keys or write an approval or a policy), and points `/etc/resolv.conf`
   at an address routed through the TUN when the host's names a loopback resolver (which the new
   namespace does not have);
2. brings its loopback up and listens on the proxy's ports there, handing the listening sockets
   to the parent ("listening"), which relays their connections to the proxy (`flightlog.port_relay`);
3. once the parent moved the proxy's TUN device in ("moved"), addresses it and makes it the default
   route for IPv4 and IPv6 ("ready"); without a TUN device (not root) there is no route at all;
4. becomes the command (`exec`), so its pid, signals and exit code are the command's.

Any step that fails says why in one line to the parent and exits 1: the command never runs unsealed.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
from typing import Any, Final

PLAN_VARIABLE: Final = "FLIGHTLOG_SEALED"
INSIDE_V4: Final = "10.0.85.2/24"
GATEWAY_V4: Final = "10.0.85.1"
INSIDE_V6: Final = "fd85:f1::2/64"
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ: Final = "16sH22x"


class Failed(Exception):
    """A step of the sealing failed; the message says which and why."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise Failed(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    """mount(2) itself: in a user namespace the `mount` program refuses a user who is not root, and
    a program run here would lose the namespace's capabilities at exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    args = [x.encode() if x is not None else None for x in (source, target, fstype)]
    if libc.mount(*args, ctypes.c_ulong(flags), data.encode() if data else None) != 0:
        raise Failed(f"cannot mount {target}: {os.strerror(ctypes.get_errno())}")


def _leave(plan: dict[str, Any]) -> None:
    """Step 1: own network and mount namespaces (and a user namespace mapping only our own user and
    group, without root); FLIGHTLOG_HOME hidden; a resolver that answers."""
    user = plan.get("userns")
    try:
        os.unshare(os.CLONE_NEWNET | os.CLONE_NEWNS | (os.CLONE_NEWUSER if user else 0))
    except OSError as e:
        raise Failed(f"cannot make the namespaces: {e.strerror}") from e
    if user:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{user[0]} {user[0]} 1"),
                           ("gid_map", f"{user[1]} {user[1]} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    for path in plan.get("hide", ()):
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", 0, "mode=0700,size=64k")
    if plan.get("nameserver"):
        fd, resolv = tempfile.mkstemp(prefix="flightlog-resolv-")
        with os.fdopen(fd, "w") as f:
            f.write(f"nameserver {plan['nameserver']}\n")
        os.chmod(resolv, 0o644)
        try:
            _mount(resolv, "/etc/resolv.conf", None, MS_BIND, None)
        finally:
            os.unlink(resolv)


def _loopback_up() -> None:
    """`ip link set lo up`, by ioctl (no program: see `_mount`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def _listen(ports: list[int]) -> list[socket.socket]:
    """Step 2: loopback up, and the proxy's ports listening on it."""
    _loopback_up()
    out = []
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        out.append(sock)
    return out


def _route(tun: str) -> None:
    """Step 3: the TUN device addressed and the default route, both families."""
    _ip("addr", "add", INSIDE_V4, "dev", tun)
    _ip("link", "set", tun, "up")
    _ip("route", "add", "default", "dev", tun)
    _ip("-6", "addr", "add", INSIDE_V6, "dev", tun, "nodad")
    _ip("-6", "route", "add", "default", "dev", tun)


def _expect(link: socket.socket, word: bytes) -> None:
    got = link.recv(256).strip()
    if got != word:
        raise Failed(f"the parent said {got.decode(errors='replace') or 'nothing'}, not {word.decode()}")


def main() -> int:
    link = socket.socket(fileno=int(sys.argv[1]))
    plan = json.loads(os.environ.pop(PLAN_VARIABLE))
    command: list[str] = plan["command"]
    try:
        _leave(plan)
        listening = _listen(plan["ports"])
        socket.send_fds(link, [b"listening"], [s.fileno() for s in listening])
        for sock in listening:
            sock.close()  # the parent holds them now; the command must not
        _expect(link, b"moved")
        if plan.get("tun"):
            _route(plan["tun"])
    except (Failed, OSError) as e:
        link.sendall(b"error: " + str(e).encode()[:500])
        return 1
    link.sendall(b"ready")
    link.close()
    try:
        os.execvpe(command[0], command, os.environ)
    except OSError as e:
        print(f"flightlog run --sealed: cannot run {command[0]}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
