"""Every port the proxy plans is its own from the plan to the listen: nobody takes it in between.

`flightlog proxy` fixes its ports in the CLI, seconds before mitmproxy listens (imports, the writer,
the CA). A port checked free and let go in that window was anyone's: under load another proxy's pick
took one ("address already in use", seen in `make test`). The suite here takes the attacker's side:
every way another process might bind a planned port (each socket option and address spelling), tried
against the CLI's plan directly and against a real proxy caught between its plan and its listen.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from addons.listening import HeldPorts, bind_all
from flightlog import ports
from tests.support.ports import free_block
from tests.support.processes import stop_group
from tests.support.upstream import Upstream

Competitor = Callable[[int], socket.socket]


def _socket(
    family: int = socket.AF_INET, *, reuse_addr: bool = False, reuse_port: bool = False
) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    if reuse_addr:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    return sock


def _competitor(host: str, *, listen: bool, family: int = socket.AF_INET, **options: bool) -> Competitor:
    def take(port: int) -> socket.socket:
        sock = _socket(family, **options)
        try:
            sock.bind((host, port))
            if listen:
                sock.listen()
        except BaseException:
            sock.close()
            raise
        return sock

    return take


COMPETITORS: dict[str, Competitor] = {
    f"{name} on {host or 'any'}{' listening' if listen else ''}": _competitor(host, listen=listen, **options)
    for name, options in {
        "plain bind": {},
        "SO_REUSEADDR (asyncio, mitmproxy)": {"reuse_addr": True},
        "SO_REUSEPORT": {"reuse_port": True},
        "SO_REUSEADDR and SO_REUSEPORT": {"reuse_addr": True, "reuse_port": True},
    }.items()
    for host in ("127.0.0.1", "0.0.0.0")
    for listen in (False, True)
}
"""Every way another process binds a port over IPv4: each option, the address or the wildcard,
bound only or listening too (4 x 2 x 2)."""

COMPETITORS_WITHOUT_REUSEPORT = {k: v for k, v in COMPETITORS.items() if "REUSEPORT" not in k}
"""The workers share their ports with SO_REUSEPORT, which another process of the same user may
join (addons.shared_ports): they refuse everyone else."""


def _refused(take: Competitor, port: int) -> bool:
    try:
        take(port).close()
    except OSError as e:
        assert e.errno == errno.EADDRINUSE, e
        return True
    return False


@pytest.mark.parametrize("given", [False, True], ids=["port 0: picked", "port named"])
def test_every_planned_port_refuses_every_competitor_until_released(given: bool) -> None:
    """The plan of `--listen 127.0.0.1:P` (or :0), two model API listeners and one `@0` mode: each
    of its four ports refuses every competitor while the plan holds it, and is free once released."""
    start = free_block(3) if given else 0
    planned = ports.plan_ports("127.0.0.1", start, ["openai", "anthropic"], 1)
    planned_ports = [planned.forward, *planned.named, *planned.extra]
    try:
        assert sorted(planned.held.ports) == sorted(planned_ports) and len(set(planned_ports)) == 4
        taken = {
            (name, port): not _refused(take, port)
            for name, take in COMPETITORS.items()
            for port in planned_ports
        }
        assert not any(taken.values()), [key for key, ok in taken.items() if ok]
    finally:
        planned.held.close()
    assert all(ports.is_free("127.0.0.1", port) for port in planned_ports)


def test_a_wildcard_plan_holds_ipv4_and_ipv6() -> None:
    """`--listen 0.0.0.0`'s spelling as mitmproxy's wildcard (an empty host) holds every address
    asyncio would listen on: IPv4 and, where this machine has it, IPv6."""
    held = HeldPorts()
    try:
        (port,) = ports.free_ports("", 1, held)
        families = {sock.family for sock in held.held[("", port)]}
        assert socket.AF_INET in families
        assert _refused(_competitor("0.0.0.0", listen=True, reuse_addr=True), port)
        if socket.AF_INET6 in families:
            assert _refused(_competitor("::", listen=True, family=socket.AF_INET6, reuse_addr=True), port)
    finally:
        held.close()


def test_a_held_socket_is_listened_on_as_it_is() -> None:
    """The hand-over: what `bind_all` holds for an address is exactly what the listener serves on
    (the same socket, its port unchanged), and it refuses competitors from the plan to the close."""
    import asyncio

    from addons.listening import _on_held

    sockets = bind_all("127.0.0.1", 0, exclusive=True)
    port = sockets[0].getsockname()[1]

    async def serve_once() -> bytes:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"held")
            await writer.drain()
            writer.close()

        (server,) = await _on_held(handle, sockets)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = await reader.read()
        writer.close()
        assert _refused(COMPETITORS["SO_REUSEADDR (asyncio, mitmproxy) on 127.0.0.1 listening"], port)
        server.close()
        await server.wait_closed()
        return data

    assert asyncio.run(serve_once()) == b"held"


# -- a real proxy, caught between its plan and its listen ------------------------------------------


def _tcp_sockets(pid: int) -> list[tuple[int, bool]]:
    """(port, listening) of each TCP socket the process holds on 127.0.0.1, read through a copy of its
    descriptor (pidfd_getfd: a bound, not listening socket is in no /proc/net table), let go at once."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            copy = libc.syscall(PIDFD_GETFD, pidfd, int(fd), 0)
            if copy < 0:
                err = ctypes.get_errno()
                assert err in (errno.EBADF, errno.ESRCH), os.strerror(err)  # closed meanwhile, or gone
                continue
            with socket.socket(fileno=copy) as sock:
                if sock.type == socket.SOCK_STREAM and sock.family == socket.AF_INET:
                    host, port = sock.getsockname()
                    if host == "127.0.0.1":
                        out.append((port, bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))))
    except FileNotFoundError:
        return []
    finally:
        os.close(pidfd)
    return out


PIDFD_GETFD = 438


@contextmanager
def _proxy(home: Path, workers: int) -> Iterator[subprocess.Popen[bytes]]:
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(FLIGHTLOG_HOME=str(home), FLIGHTLOG_LEDGER=f"sqlite:///{home / 'ledger.db'}")
    log = (home / "proxy.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "proxy", "--listen", "127.0.0.1:0", "--workers", str(workers)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        stop_group(proc, grace=10)
        log.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_starting_proxy_keeps_its_ports_from_every_competitor(
    tmp_path: Path, http_upstream: Upstream, workers: int
) -> None:
    """An attacker watching a starting `flightlog proxy --listen 127.0.0.1:0` (its descriptors) sees
    its three ports bound before it listens, tries every competitor on each in that window and gets
    none; the proxy then listens on exactly those ports and serves on them."""
    home = tmp_path / "home"
    competitors = COMPETITORS if workers == 1 else COMPETITORS_WITHOUT_REUSEPORT
    with _proxy(home, workers) as proc:
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
            found = _tcp_sockets(proc.pid)
            seen = {port for port, listening in found if not listening}
            if any(listening for _, listening in found):
                break  # listening already: the window, if there was one, was missed
            time.sleep(0.005)
        log = (home / "proxy.log").read_text(errors="replace")
        assert len(seen) == 3, f"the planned ports were not held before the listen: {seen}\n{log}"
        taken = [
            (name, port) for name, take in competitors.items() for port in seen if not _refused(take, port)
        ]
        assert not taken, taken
        while not (home / "proxy.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        state = json.loads((home / "proxy.json").read_text())
        assert {int(x["port"]) for x in state["listeners"]} == seen
        forward = next(int(x["port"]) for x in state["listeners"] if x["mode"].startswith("regular"))
        answer = httpx.get(f"{http_upstream.base}/fixed", proxy=f"http://127.0.0.1:{forward}", timeout=30)
        assert answer.status_code == 200
    assert proc.returncode is not None
