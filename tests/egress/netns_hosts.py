"""Test hosts for the sealed tests: a network namespace per host, reached over a veth pair in
198.51.100.0/26 (documentation addresses this machine does not use), never this machine's own address.

A host's servers are made in the test's own process: their listening socket is created while the
calling thread is in the host's namespace (`setns`), so it lives there, and the server's threads serve
it from anywhere. The proxy (in the machine's namespace) reaches the host through the veth's /30.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

NETWORK: Final = ipaddress.ip_network("198.51.100.0/26")
PREFIX: Final = "h48"


@dataclass(frozen=True)
class Host:
    """A namespace `name` at `address`, whose veth peer on this machine is `gateway`."""

    name: str
    address: str
    gateway: str

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """This thread in the host's network namespace (sockets made now live there)."""
        with open(f"/run/netns/{self.name}") as there, open("/proc/thread-self/ns/net") as here:
            os.setns(there.fileno(), os.CLONE_NEWNET)
            try:
                yield
            finally:
                os.setns(here.fileno(), os.CLONE_NEWNET)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True)


LOCK: Final = Path("/tmp/flightlog-test-netns.lock")
"""Held while a /30 is chosen and claimed: two tests starting at once would pick the same one."""


@contextlib.contextmanager
def network_host() -> Iterator[Host]:
    """A fresh namespace and veth pair on a free /30 of the range; removed (with its veth) at exit."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            made = _claim()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    host, outside = made
    try:
        yield host
    finally:
        _ip("link", "del", outside)
        _ip("netns", "del", host.name)


def _claim() -> tuple[Host, str]:
    """Make the namespace and veth pair on the highest free /30 (older copies of this helper, in
    other checkouts running at once, take the lowest without looking); a /30 whose addresses are
    already on this machine is another test's (a second route to it would send traffic there)."""
    for index, subnet in reversed(list(enumerate(NETWORK.subnets(new_prefix=30)))):
        name = f"{PREFIX}-{os.getpid() % 10000}-{index}"
        taken = _ip("-o", "addr", "show", "to", f"{subnet}").stdout.strip()
        if taken or Path(f"/run/netns/{name}").exists() or _ip("netns", "add", name).returncode:
            continue
        outside, inside = f"{PREFIX}o{os.getpid() % 10000}x{index}", f"{PREFIX}i{os.getpid() % 10000}x{index}"
        gateway, address = (str(a) for a in list(subnet.hosts())[:2])
        steps = [
            ("link", "add", outside, "type", "veth", "peer", "name", inside),
            ("link", "set", inside, "netns", name),
            ("addr", "add", f"{gateway}/30", "dev", outside),
            ("link", "set", outside, "up"),
            ("-n", name, "addr", "add", f"{address}/30", "dev", inside),
            ("-n", name, "link", "set", inside, "up"),
            ("-n", name, "link", "set", "lo", "up"),
        ]
        for step in steps:
            done = _ip(*step)
            if done.returncode:
                _ip("link", "del", outside)
                _ip("netns", "del", name)
                raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")
        return Host(name, address, gateway), outside
    raise RuntimeError(f"no free /30 left in {NETWORK} for a test host")
