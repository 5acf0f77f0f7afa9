"""`flightlog run --sealed -- COMMAND`: its only way out is flightlog, and it holds no authority over it.

The command runs in an OS sandbox (`flightlog.sandbox`): bubblewrap gives it its own user, PID, mount,
IPC, UTS and cgroup namespaces, an unprivileged user with no capability (root outside runs it as the
working directory's owner, or nobody), no_new_privs, a seccomp filter, and a filesystem where
FLIGHTLOG_HOME, the credential places and the host's sockets are absent. It cannot see flightlog's
processes (its /proc holds its own), so there is no parent to enter, trace or signal.

Its network namespace is made first, by the helper `flightlog.sealed_child`. As root, its default
route, IPv4 and IPv6, is a TUN device whose other end is mitmproxy's TUN mode in a proxy started for
this command: every TCP connection and UDP datagram the command sends, whatever the client (Node's
`fetch`, `curl --noproxy '*'`, a raw socket), ends in the proxy, which records HTTP (and TLS it can
open with its CA) and judges it by the egress policy; DNS is answered there; anything else is refused
and recorded as such (`addons.egress_policy`). Proxy-aware clients use the proxy variables as under a
plain `run`: the proxy's ports are listening sockets inside the namespace, relayed to the proxy
(`flightlog.port_relay`). Not root, the namespace has those ports and nothing else. The proxy knows
it serves a sealed command (`addons.seal`): the identity is the run's, whatever a request claims.

How (the device is made where mitmproxy can make it, then handed over): the proxy creates the TUN
device `fltPID` in our namespace; the helper leaves for a new network namespace, listens on the
proxy's ports there and hands the sockets over; we move the device into its namespace (`ip link set
DEV netns PID`); it addresses the device, routes through it, becomes the unprivileged user and then
bwrap. mitmproxy's TUN mode creates its device in the proxy's own namespace and cannot take one made
elsewhere, hence root for it. Where sealing is impossible, one line says why and nothing runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from flightlog import port_relay, proxy_process
from flightlog.errors import CommandError
from flightlog.sandbox import bwrap, filesystem, syscalls
from flightlog.sandbox.filesystem import FsPolicy, Scratch
from flightlog.sealed_child import GATEWAY_V4, PLAN_VARIABLE

if TYPE_CHECKING:
    from addons.proxy_env import ProxyState

TUN_DEVICE: Final = "/dev/net/tun"
Way = Literal["tun", "userns"]
WITHOUT_TUN: Final = (
    "run --sealed: not root, so no TUN device: the command's only way out is the proxy's ports; a "
    "client that ignores the proxy variables cannot connect, and its attempt is not recorded"
)
HANDSHAKE_TIMEOUT: Final = 15.0
_CAP_NET_ADMIN: Final = 12
_CAP_SYS_ADMIN: Final = 21


def how() -> tuple[Way | None, str]:
    """How this process can seal a command (`tun`, `userns`), or (None, why it cannot)."""
    if not sys.platform.startswith("linux"):
        return None, "sealing needs Linux network namespaces"
    if shutil.which("ip") is None:
        return None, "the 'ip' command (iproute2) is needed and is not on PATH"
    if _has_capabilities(_CAP_NET_ADMIN, _CAP_SYS_ADMIN):
        if os.path.exists(TUN_DEVICE):
            return "tun", ""
        return None, f"there is no {TUN_DEVICE} (load the tun module, or give the container the device)"
    if user_namespaces():
        return "userns", ""
    return None, (
        "it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) for a TUN device, or, without root, user "
        "namespaces, which this kernel does not allow (sysctl user.max_user_namespaces, "
        "kernel.unprivileged_userns_clone, or an AppArmor or seccomp profile)"
    )


def why_not() -> str | None:
    """Why this process cannot seal with a TUN device (None: it can)."""
    way, reason = how()
    if way == "tun":
        return None
    return reason or (
        "it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): mitmproxy's TUN mode makes its device in the "
        "proxy's own network namespace, which a user namespace cannot lend"
    )


def user_namespaces() -> bool:
    """Whether this process may make a user namespace (tried: sysctls, AppArmor and seccomp all say)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    done = subprocess.run([unshare, "--user", "--net", "true"], capture_output=True)
    return done.returncode == 0


def _has_capabilities(*caps: int) -> bool:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return os.geteuid() == 0
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            effective = int(line.split()[1], 16)
            return all(effective >> cap & 1 for cap in caps)
    return os.geteuid() == 0


def loopback_resolver(resolv_conf: Path = Path("/etc/resolv.conf")) -> bool:
    """Whether the host resolves names through a loopback address, which a new namespace lacks."""
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(parts[1].split("%")[0]).is_loopback:
                    return True
    return False


def seal(
    command: Sequence[str],
    options: Sequence[str],
    identity: str,
    home: Path,
    child_env: Mapping[str, str],
    build_env: Callable[[ProxyState, Path], Mapping[str, str]],
    fs: FsPolicy = FsPolicy(),
    lent: Mapping[Path, Path] = {},
) -> int:
    """Run `command` sealed; its exit code (128+N when killed by signal N). `build_env(state, ca)`
    gives the variables for a proxy state and a CA file (those of a plain `run`); `fs` is what the
    operator named beyond the sandbox's defaults; `lent` the run's lent files (`flightlog.lent_files`,
    placeholders only), bound in read-only where they are."""
    way, reason = how()
    if way is None:
        raise CommandError(f"run --sealed: cannot seal here: {reason}")
    found = shutil.which(command[0], path=child_env.get("PATH"))
    if found is None and not os.path.exists(command[0]):
        raise CommandError(f"command not found: {command[0]}")
    runner = bwrap.binary()
    cwd = Path.cwd()
    user = bwrap.sandbox_user(cwd, os.geteuid())
    home_dirs = filesystem.homes([os.getuid(), *([user[0]] if user else [])], child_env.get("HOME"))
    for needed in programs(Path(found or command[0]), child_env.get("PATH")):
        hidden = filesystem.hidden(needed, fs, cwd=cwd, flightlog_home=home, home_dirs=home_dirs, user=user)
        if hidden is not None:
            raise CommandError(out_of_sight(command[0], needed, *hidden))
    seccomp = syscalls.filter_fd(unix_sockets=bool(fs.sockets))  # before anything starts: fails closed
    device = f"flt{os.getpid()}"[:15] if way == "tun" else None
    state_name = f"sealed-{os.getpid()}.json"
    args = [*options, "--state-file", state_name, "--set", "flightlog_sealed=true"]
    args += ["--set", f"flightlog_sealed_identity={identity}"]
    if device is not None:
        args += ["--mode", f"tun:{device}"] + (
            ["--set", f"flightlog_tun_identity={identity}"] if identity else []
        )
    else:
        print(f"flightlog {WITHOUT_TUN}", file=sys.stderr)
    # the sandbox's user must walk into it: as root, not a TMPDIR root may have made private
    scratch = Path(tempfile.mkdtemp(prefix="flightlog-sealed-", dir="/tmp" if user else None))
    stages: dict[str, str] = {}  # where the helper binds a place bwrap's user cannot reach: from
    proxy = proxy_process.spawn(proxy_process.child_env(), options=args)
    try:
        state = proxy_process.wait_for_state(home, proxy, name=state_name)
        os.chmod(scratch, 0o755)  # the sandbox's user finds the CA and the covers here
        ca = scratch / "ca.pem"  # FLIGHTLOG_HOME is absent inside: the CA travels beside it
        shutil.copyfile(state.ca, ca)
        ca.chmod(0o644)
        files = {ca: ca, **lent, **_resolver(scratch, nameserver=bool(device) and loopback_resolver())}
        mounts = filesystem.mounts(
            fs, cwd=cwd, flightlog_home=home, home_dirs=home_dirs,
            scratch=Scratch.make(scratch), user=user or (os.getuid(), os.getgid()), files=files,
            staged=lambda path: _stage(path, scratch, stages, root=device is not None),
        )  # fmt: skip
        env = {**child_env, **build_env(state, ca)}
        listeners = [x for x in state.listeners if x.mode.startswith(("regular", "reverse"))]
        ports = [x.port for x in listeners]
        plan = {
            "sandbox": bwrap.argv(runner, mounts, seccomp, command),
            "ports": ports,
            "tun": device,
            "userns": device is None,
            "user": list(user) if user else None,
            "stages": stages,
        }
        return asyncio.run(_run(plan, env, [("127.0.0.1", p) for p in ports], seccomp))
    finally:
        os.close(seccomp)
        proxy_process.stop(proxy)
        for entry in scratch.iterdir():  # the covers are mode 000: a user who is not root could not
            with contextlib.suppress(OSError):  # look inside to remove them
                entry.chmod(0o700)
        shutil.rmtree(scratch, ignore_errors=True)


def programs(found: Path, path: str | None) -> list[Path]:
    """What running `found` needs to find: the file, each link on the way to the program, and a
    script's interpreter (`#!/usr/bin/env NAME`: NAME as found on `path`), the same for it."""
    needed: list[Path] = []
    for _ in range(8):  # a script's interpreter may be a script: a few levels, not a loop
        hops = [Path(os.path.abspath(found))]
        while hops[-1].is_symlink() and len(hops) < 40:
            hops.append(hops[-1].parent / os.readlink(hops[-1]))
        needed += hops
        interpreter = _shebang(hops[-1], path)
        if interpreter is None or interpreter in needed:
            return needed
        found = interpreter
    return needed


def _shebang(program: Path, path: str | None) -> Path | None:
    try:
        with program.open("rb") as f:
            line = f.readline(256)
    except OSError:
        return None
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    if not words:
        return None
    if Path(words[0]).name == "env":
        name = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        where = shutil.which(name, path=path) if name else None
        return Path(where) if where else None
    return Path(words[0])


def out_of_sight(command: str, needed: Path, place: Path, what: str) -> str:
    """The one line for a command that would not start sealed: what it needs, what hides it, and
    what to do (bwrap itself only says `execvp ...: No such file or directory`)."""
    where = f"{place} is {what}" if place != needed else f"it is {what}"
    fix = (
        "move it out of FLIGHTLOG_HOME"
        if what.startswith("FLIGHTLOG_HOME")
        else f"name its folder with --read {needed.parent}"
    )
    return f"run --sealed: {command} needs {needed}, which the sealed command cannot see ({where}): {fix}"


def _stage(path: Path, scratch: Path, stages: dict[str, str], root: bool) -> Path:
    """Where the helper, as root, binds `path` (which the sandbox's user cannot walk down to) for
    bwrap to find it (`filesystem.mounts`), noted in `stages`."""
    if not root:
        raise CommandError(f"run --sealed: {path} is out of the sandbox's user's reach")
    folder = scratch / "reach"
    folder.mkdir(mode=0o755, exist_ok=True)
    stage = folder / str(len(stages))
    stage.mkdir() if path.is_dir() else stage.touch()
    stages[str(stage)] = str(path)
    return stage


def _resolver(scratch: Path, nameserver: bool) -> dict[Path, Path]:
    """The resolv.conf the command reads: one naming the TUN's gateway when the host's resolver is on
    its loopback (which the namespace does not share); else the host's, bound back in where it is
    kept when that is a folder the sandbox empties (/run/systemd/resolve/...)."""
    conf = Path("/etc/resolv.conf")
    if nameserver:
        ours = scratch / "resolv.conf"
        ours.write_text(f"nameserver {GATEWAY_V4}\n")
        ours.chmod(0o644)
        return {conf: ours}
    real = Path(os.path.realpath(conf))
    if real != conf and real.exists() and real.parts[1:2] in (("run",), ("var",)):
        return {real: real}
    return {}


async def _run(
    plan: dict[str, object], env: Mapping[str, str], targets: list[tuple[str, int]], seccomp: int
) -> int:
    ours, theirs = socket.socketpair()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "flightlog.sealed_child",
        str(theirs.fileno()),
        pass_fds=[theirs.fileno(), seccomp],
        env={**env, PLAN_VARIABLE: json.dumps(plan)},
    )
    theirs.close()
    loop = asyncio.get_running_loop()
    relays: list[port_relay.PortRelay] = []
    try:
        fds = await _handshake(ours, proc, str(plan["tun"] or ""))
        for fd, target in zip(fds, targets, strict=True):
            relays.append(port_relay.PortRelay(socket.socket(fileno=fd), target))
            await relays[-1].start()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, _forward, proc, sig)
        code = await proc.wait()
    finally:
        ours.close()
        for relay in relays:
            await relay.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return 128 - code if code < 0 else code


async def _handshake(link: socket.socket, proc: asyncio.subprocess.Process, device: str) -> list[int]:
    """The helper's listening sockets, once the TUN device is in its namespace and routed."""
    link.settimeout(HANDSHAKE_TIMEOUT)

    def talk() -> list[int]:
        message, fds, _, _ = socket.recv_fds(link, 1024, 16)
        if message != b"listening":
            raise CommandError(f"run --sealed: {_said(message, proc)}")
        if device:  # without a TUN device (not root): nothing to move, the namespace has no route
            moved = subprocess.run(
                ["ip", "link", "set", device, "netns", str(proc.pid)], capture_output=True, text=True
            )
            if moved.returncode:
                raise CommandError(
                    f"run --sealed: cannot move {device} into the namespace: {moved.stderr.strip()}"
                )
        link.sendall(b"moved")
        answer = link.recv(1024)
        if answer != b"ready":
            raise CommandError(f"run --sealed: {_said(answer, proc)}")
        return fds

    try:
        return await asyncio.to_thread(talk)
    except TimeoutError as e:
        raise CommandError(f"run --sealed: the namespace was not ready within {HANDSHAKE_TIMEOUT:g} s") from e


def _said(message: bytes, proc: asyncio.subprocess.Process) -> str:
    text = message.decode(errors="replace").strip()
    if text.startswith("error: "):
        return f"cannot seal: {text[len('error: ') :]}"
    return f"the sealing helper stopped ({text or 'no answer'})"


def _forward(proc: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
