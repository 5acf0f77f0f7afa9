"""What runs inside `flightlog run --sealed` in the escape suite: every way out of the sandbox it can
enumerate, each tried and reported as one JSON line `{"way", "target", "refused", "said"}`.

    python escape_probe.py FACTS_URL

It first asks FACTS_URL (a test host, through the proxy: the allowed request the suite checks is
recorded) what the machine outside looks like: its pids (and which are flightlog's), its UNIX sockets,
its /sys, the denied places, FLIGHTLOG_HOME. Each way below turns what it finds (outside or in here)
into attempts; a way out that works is reported `refused: false`, and the test fails on it.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pyseccomp

from flightlog.sandbox.syscalls import CLONE_NEW, IOCTLS, REFUSED

LIBC = ctypes.CDLL(None, use_errno=True)
Attempt = tuple[str, Callable[[], tuple[bool, str]]]
MNT_DETACH = 2
NAMESPACES = ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup", "time")
SETUID_PLACES = ("/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib", "/usr/libexec", "/usr/local/bin")


def report(way: str, target: str, refused: bool | None, said: str) -> None:
    print(json.dumps({"way": way, "target": target, "refused": refused, "said": said[:200]}), flush=True)


def failed(call: Callable[[], object]) -> tuple[bool, str]:
    """Refused when `call` raises OSError (its message), else not (what it gave)."""
    try:
        got = call()
    except OSError as e:
        return True, f"{errno.errorcode.get(e.errno or 0, e.errno)}: {e.strerror}"
    return False, f"worked: {str(got)[:100]}"


def program(*args: str) -> tuple[bool, str]:
    """Refused when the program fails (or is not there); one still at work after a while got in."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return True, "not installed"
    except subprocess.TimeoutExpired:
        return False, "still running: it got in (strace attached, a shell started)"
    said = (done.stderr or done.stdout).strip().splitlines()
    return done.returncode != 0, f"exit {done.returncode}: {said[-1] if said else ''}"


def libc_call(name: str, *args: object) -> tuple[bool, str]:
    """Refused when the libc call returns -1 (its errno)."""
    result = getattr(LIBC, name)(*args)
    if result == -1:
        code = ctypes.get_errno()
        return True, f"{errno.errorcode.get(code, code)}"
    return False, f"returned {result}"


def own_pidns() -> str:
    return os.readlink("/proc/self/ns/pid")


def outside(pid: int, host_pidns: str, call: Callable[[], object]) -> tuple[bool, str]:
    """An attempt on host pid `pid`: refused when it fails, or when the pid here is one of the
    sandbox's own processes (a number the sandbox's PID namespace also uses), not the one outside."""
    try:
        if own_pidns() != host_pidns and os.readlink(f"/proc/{pid}/ns/pid") == own_pidns():
            return True, f"pid {pid} here is the sandbox's own, not the one outside"
    except OSError:
        pass
    return failed(call)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read(64)


def listing(path: str) -> list[str]:
    return os.listdir(path)


def write_into(path: str) -> None:
    target = os.path.join(path, "escape-probe") if os.path.isdir(path) else path
    with open(target, "ab") as f:
        f.write(b"x")


def setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.setns(fd, 0)
    finally:
        os.close(fd)


# -- the ways, each an enumeration ------------------------------------------------------------------


def proc_of_outside(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """/proc/PID/{root,ns/*,environ,mem} and signals, for every process outside."""
    host = facts["pidns"]
    for pid in facts["pids"]:
        yield "/proc/*/root", str(pid), lambda p=pid: outside(p, host, lambda: listing(f"/proc/{p}/root/"))
        for ns in NAMESPACES:
            yield (
                "/proc/*/ns/*",
                f"{pid}/{ns}",
                lambda p=pid, n=ns: outside(p, host, lambda: setns(f"/proc/{p}/ns/{n}")),
            )
        yield "/proc/*/environ", str(pid), lambda p=pid: outside(p, host, lambda: read(f"/proc/{p}/environ"))
        yield "/proc/*/mem", str(pid), lambda p=pid: outside(p, host, lambda: read(f"/proc/{p}/mem"))
        # signal 0: whether a signal would be delivered, without delivering one (kind to a shared machine)
        yield "signal", str(pid), lambda p=pid: outside(p, host, lambda: os.kill(p, 0))


def flightlogs(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """Tracing and entering flightlog's own processes (the run, its proxy, bwrap)."""
    for pid in facts["flightlog"]:
        yield "ptrace", f"strace -p {pid}", lambda p=pid: program("strace", "-p", str(p), "-e", "trace=none")
        yield "nsenter", f"-t {pid} -n", lambda p=pid: program("nsenter", "-t", str(p), "-n", "true")
    yield "ptrace", "strace true (its own child)", lambda: program("strace", "-o", "/dev/null", "true")
    yield "ptrace", "PTRACE_ATTACH pid 1", lambda: libc_call("ptrace", 16, 1, None, None)
    for ns in NAMESPACES:
        yield "nsenter", f"setns /proc/1/ns/{ns}", lambda n=ns: failed(lambda: setns(f"/proc/1/ns/{n}"))


def namespaces(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """New namespaces (a new user namespace would hold every capability in it)."""
    for flags in ("-U", "-Ur", "-n", "-m", "-p -f", "-i", "-u", "-C", "-T"):
        yield "unshare", flags, lambda f=flags: program("unshare", *f.split(), "true")
    for name, flag in CLONE_NEW.items():
        yield "unshare", f"clone({name})", lambda f=flag: in_child(lambda: raw_clone(f))
        yield "unshare", f"unshare({name})", lambda f=flag: in_child(lambda: os.unshare(f))


def in_child(call: Callable[[], object]) -> tuple[bool, str]:
    """`failed(call)` in a child process, so a call that works changes the child, not the probe."""
    pid = os.fork()
    if pid == 0:
        refused, _ = failed(call)
        os._exit(1 if refused else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0, f"child exit {os.waitstatus_to_exitcode(status)}"


def raw_clone(flag: int) -> int:
    """clone(2) itself with `flag` (a raw clone makes a user namespace without `unshare`)."""
    pid = LIBC.syscall(56, flag | signal.SIGCHLD, 0, 0, 0, 0)  # SYS_clone on x86_64
    if pid == 0:
        os._exit(0)
    if pid == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return int(pid)


def mounts(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """mount, umount of every mount here (the covers over FLIGHTLOG_HOME and the credentials too),
    chroot, pivot_root."""
    yield "mount", "mount -t tmpfs", lambda: program("mount", "-t", "tmpfs", "none", "/tmp")
    yield "mount", "mount(2) tmpfs", lambda: libc_call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
    with open("/proc/self/mountinfo") as info:
        points = sorted({line.split()[4] for line in info})
    for point in points:
        yield "umount", point, lambda p=point: libc_call("umount2", p.encode(), MNT_DETACH)
        yield "umount", f"umount {point}", lambda p=point: program("umount", "-l", p)
    yield "chroot", "chroot / true", lambda: program("chroot", "/", "true")
    yield "chroot", "chroot(2)", lambda: libc_call("chroot", b"/tmp")
    yield (
        "chroot",
        "pivot_root(2)",
        lambda: (lambda r: (r == -1, f"returned {r}"))(LIBC.syscall(155, b"/tmp", b"/tmp")),
    )


def filesystem(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """The denied places and FLIGHTLOG_HOME for reading and writing, /sys, /proc's knobs, the root."""
    for place in [*facts["denied"], facts["home"]]:
        way = "FLIGHTLOG_HOME" if place == facts["home"] else "denied place"
        yield (
            f"{way} read",
            place,
            lambda p=place: failed(lambda: listing(p) if os.path.isdir(p) else read(p)),
        )
        yield f"{way} write", place, lambda p=place: failed(lambda: write_into(p))
    for name in facts["keys"]:
        yield "FLIGHTLOG_HOME read", name, lambda n=name: failed(lambda: read(n))
    for entry in facts["sys"]:
        path = f"/sys/{entry}"
        yield "/sys", path, lambda p=path: sys_refused(p)
    yield (
        "/sys",
        "write /sys/devices/system/cpu/online",
        lambda: failed(lambda: write_into("/sys/devices/system/cpu/online")),
    )
    for knob in ("/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/proc/sys/net/ipv4/ip_forward"):
        yield "/proc knob", knob, lambda k=knob: failed(lambda: write_into(k))
    for entry in sorted(os.listdir("/")):
        path = f"/{entry}"
        if entry in ("tmp", "dev", "proc") or os.getcwd().startswith(path + "/") or os.getcwd() == path:
            continue
        yield "write the root", path, lambda p=path: failed(lambda: write_into(p))


def sys_refused(path: str) -> tuple[bool, str]:
    """/sys shows nothing of the host but the CPUs' folder."""
    if not os.path.exists(path):
        return True, "absent"
    if path == "/sys/devices" and os.listdir(path) == ["system"] and os.listdir(f"{path}/system") == ["cpu"]:
        return True, "only system/cpu"
    return False, f"shows {sorted(os.listdir(path))[:5]}"


def sockets(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """Every UNIX socket outside (by path and abstract name), psql over the host's socket, and new
    sockets for the network's configuration."""
    for name in facts["sockets"]:
        address = "\0" + name[1:] if name.startswith("@") else name
        yield "host socket", name, lambda a=address: failed(lambda: connect_unix(a))
    psql = ["psql", "-w", "-U", "postgres", "-d", "test", "-tAc", "select version()"]
    yield "psql", "host UNIX socket", lambda: program(*psql, "-h", "/var/run/postgresql")
    yield "psql", "127.0.0.1 (the sandbox's own)", lambda: program(*psql, "-h", "127.0.0.1")
    for family in ("AF_NETLINK", "AF_PACKET"):
        yield (
            "new socket",
            family,
            lambda f=family: failed(lambda: socket.socket(getattr(socket, f), socket.SOCK_RAW, 0).close()),
        )
    yield "network config", "ip link add", lambda: program("ip", "link", "add", "h48x", "type", "dummy")
    yield "network config", "ip route add", lambda: program("ip", "route", "add", "192.0.2.0/24", "dev", "lo")


def connect_unix(address: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        s.connect(address)


def privileges(facts: dict[str, Any]) -> Iterator[tuple[str, str, Callable[[], tuple[bool, str]]]]:
    """Setuid and setgid programs, capabilities held, the refused system calls, the terminal."""
    for path in setuid_programs():
        yield "setuid program", path, lambda p=path: elevated(p)
    yield "capabilities held", "CapEff, CapBnd, NoNewPrivs", held
    arch = pyseccomp.system_arch()
    for name in REFUSED:
        number = pyseccomp.resolve_syscall(arch, name)
        yield "system call", name, lambda n=number: syscall_refused(n)
    for name, request in IOCTLS.items():
        yield "terminal", name, lambda r=request: libc_call("ioctl", 0, r, b"x")


def setuid_programs() -> list[str]:
    found = []
    for place in SETUID_PLACES:
        for root, _, files in os.walk(place):
            for name in files:
                path = os.path.join(root, name)
                with_bits = os.lstat(path)
                if stat.S_ISREG(with_bits.st_mode) and with_bits.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    found.append(path)
    return sorted(set(found))


def elevated(path: str) -> tuple[bool, str]:
    """Refused when the program runs with our ids, whatever its bits (read while it runs, or as a
    zombie: its ids stay until it is reaped)."""
    try:
        proc = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    except OSError as e:
        return True, f"cannot run: {e.strerror}"
    try:
        with open(f"/proc/{proc.pid}/status") as f:
            ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid:", "Gid:"))}
    finally:
        proc.kill()
        proc.wait()
    euid, egid = int(ids["Uid"][1]), int(ids["Gid"][1])
    return (euid, egid) == (os.geteuid(), os.getegid()), f"ran as uid {euid} gid {egid}"


def held() -> tuple[bool, str]:
    with open("/proc/self/status") as f:
        status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    none = all(int(status[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
    return none and status[
        "NoNewPrivs"
    ] == "1", f"CapEff {status['CapEff']} NoNewPrivs {status['NoNewPrivs']}"


def syscall_refused(number: int) -> tuple[bool, str]:
    """The filter's answer is EPERM, whatever the call would have said with these arguments."""
    result = LIBC.syscall(number, 0, 0, 0, 0, 0)
    code = ctypes.get_errno()
    return result == -1 and code == errno.EPERM, f"returned {result}, {errno.errorcode.get(code, code)}"


WAYS = (proc_of_outside, flightlogs, namespaces, mounts, filesystem, sockets, privileges)


def identity(facts_url: str) -> None:
    """Requests that claim another identity, one per spelling (each header, and proxy credentials
    of its own): the suite reads how they were filed."""
    for field, value in (
        ("X-Flightlog-Agent", "beta"),
        ("X-Flightlog-Session", "s-other"),
        ("X-Flightlog-Task", "t-other"),
    ):
        request = urllib.request.Request(f"{facts_url}?claim={field}", headers={field: value})
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
        report("identity header", field, None, f"{field.rsplit('-', 1)[1].lower()}={value}")
    proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
    forged = base64.b64encode(b"agent=beta:x").decode()
    connection = http.client.HTTPConnection(proxy.hostname or "", proxy.port, timeout=30)
    connection.request(
        "GET", f"{facts_url}?claim=Proxy-Authorization", headers={"Proxy-Authorization": f"Basic {forged}"}
    )
    connection.getresponse().read()
    connection.close()
    report("identity header", "Proxy-Authorization", None, "agent=beta")


def main() -> None:
    facts_url = sys.argv[1]
    with urllib.request.urlopen(facts_url, timeout=60) as answer:
        facts = json.loads(answer.read())
    for way in WAYS:
        for name, target, attempt in way(facts):
            refused, said = attempt()
            report(name, target, refused, said)
    identity(facts_url)


if __name__ == "__main__":
    main()
