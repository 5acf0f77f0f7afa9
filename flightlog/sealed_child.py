"""Inside a sealed command's network namespace, before the sandbox: the half of `--sealed` that runs there.

Started by `flightlog.sealed` as `python -m flightlog.sealed_child FD` with its plan in the
`FLIGHTLOG_SEALED` variable (JSON), it talks to its parent over the socket FD:

1. leaves the parent's network namespace (`unshare`; not root: in a user namespace of its own that
   maps only its own user, after becoming the sandbox's user if it was root without capabilities);
2. brings its loopback up and listens on the proxy's ports there, handing the listening sockets
   to the parent ("listening"), which relays their connections to the proxy (`flightlog.port_relay`);
3. once the parent moved the proxy's TUN device in ("moved"), addresses it and makes it the default
   route for IPv4 and IPv6 ("ready"); without a TUN device (not root) there is no route at all;
4. as root, becomes the sandbox's unprivileged user (`flightlog.sandbox.bwrap.sandbox_user`), and
   becomes bwrap (`exec`), which builds the rest of the sandbox around the command: bwrap's pid,
   signals and exit code are the command's.

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
from typing import Any, Final

from formats.errors import FlightlogError

PLAN_VARIABLE: Final = "FLIGHTLOG_SEALED"
INSIDE_V4: Final = "10.0.85.2/24"
GATEWAY_V4: Final = "10.0.85.1"
INSIDE_V6: Final = "fd85:f1::2/64"
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ: Final = "16sH22x"
PR_SET_DUMPABLE: Final = 4
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18


class Failed(FlightlogError):
    """A step of the sealing failed; the message says which and why."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise Failed(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")


def _become(user: list[int] | None) -> None:
    """The sandbox's user, for good (real, effective and saved ids; no supplementary groups)."""
    if user is None:
        return
    uid, gid = user
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        raise Failed(f"cannot become uid {uid}: {e.strerror}") from e
    # a changed uid makes the process undumpable, so its /proc/self files stay root's: its own again
    # (it writes its user namespace's maps; it still holds nothing: no capability, no other id)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
        raise Failed(f"cannot become uid {uid}: {os.strerror(ctypes.get_errno())}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    """mount(2) itself (no program: see `_loopback_up`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    args = [x.encode() if x is not None else None for x in (source, target, fstype)]
    if libc.mount(*args, ctypes.c_ulong(flags), None) != 0:
        raise Failed(f"cannot mount {source or ''} on {target}: {os.strerror(ctypes.get_errno())}")


def _leave(plan: dict[str, Any]) -> None:
    """Step 1: a network namespace of our own (and, not root, a user namespace mapping only our own
    user and group: a root without capabilities becomes the sandbox's user first). As root, a mount
    namespace too, where the places the sandbox's user could not reach are staged for bwrap."""
    userns = plan.get("userns")
    if userns:
        _become(plan.get("user"))
    try:
        os.unshare(os.CLONE_NEWNET | (os.CLONE_NEWUSER if userns else os.CLONE_NEWNS))
    except OSError as e:
        raise Failed(f"cannot make the namespaces: {e.strerror}") from e
    if not userns:  # root: places the sandbox's user cannot reach, bound where bwrap finds them
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        for stage, source in plan.get("stages", {}).items():
            _mount(source, stage, None, MS_BIND | MS_REC)
        return
    uid, gid = os.getuid(), os.getgid()
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _loopback_up() -> None:
    """`ip link set lo up`, by ioctl (no program: one run here would lose a user namespace's
    capabilities at exec)."""
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
    sandbox: list[str] = plan["sandbox"]
    try:
        _leave(plan)
        listening = _listen(plan["ports"])
        socket.send_fds(link, [b"listening"], [s.fileno() for s in listening])
        for sock in listening:
            sock.close()  # the parent holds them now; the command must not
        _expect(link, b"moved")
        if plan.get("tun"):
            _route(plan["tun"])
            _become(plan.get("user"))
    except (Failed, OSError) as e:
        link.sendall(b"error: " + str(e).encode()[:500])
        return 1
    link.sendall(b"ready")
    link.close()
    try:
        os.execve(sandbox[0], sandbox, os.environ)
    except OSError as e:
        print(f"flightlog run --sealed: cannot run bwrap ({sandbox[0]}): {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
