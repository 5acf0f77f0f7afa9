"""Listeners that several proxy processes share: every port fixed once, then bound by each worker.

`flightlog proxy --workers N` runs N mitmproxy processes on the same addresses and the kernel
spreads incoming connections over them (SO_REUSEPORT: a hash of the client's address and port, so
a few long-lived connections still land on every worker, unlike one shared accept queue, where the
first worker to wake takes them all). For that every listener needs one concrete port before any
worker starts, so `plan_ports` (in the supervisor) turns each "any free port" (`--listen HOST:0`,
`reverse:URL@0`) into a chosen one and writes it into the mode specs the workers get.

Each address is first bound plainly (SO_REUSEADDR only, as mitmproxy binds): a port that anyone
holds, another flightlog supervisor included (which could otherwise join the group and take half
the connections), is refused here in one line before any worker starts. Then the supervisor keeps
a bound, never listening, SO_REUSEPORT socket on each address for its life: only listening sockets
take connections, so it takes none, but nobody else can take the port while a worker restarts.
In each worker `addons.listening` makes mitmproxy's TCP servers bind with SO_REUSEPORT.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from addons.errors import AddonError
from addons.listening import HeldPorts

if TYPE_CHECKING:
    from mitmproxy.proxy.mode_specs import ProxyMode


@dataclass(frozen=True)
class PortPlan:
    """The mode specs and default port the workers listen with, every port concrete."""

    modes: tuple[str, ...]
    listen_port: int
    given: dict[str, str] = field(default_factory=dict)
    """Each worker spec -> the spec as given: `proxy.json` names listeners as the user wrote them."""
    held: tuple[socket.socket, ...] = ()

    def as_given(self, spec: str) -> str:
        return self.given.get(spec, spec)

    def close(self) -> None:
        for sock in self.held:
            sock.close()


def plan_ports(
    modes: Sequence[str], listen_host: str, listen_port: int, planned: HeldPorts | None = None
) -> PortPlan:
    """Choose every listener's port and hold it; a port in use or a listener workers cannot share
    (not TCP, or no port) is an AddonError saying which, and nothing stays held. An address `planned`
    (the CLI's plan, `addons.listening`) is released just before it is held here."""
    parsed = [_parse(spec) for spec in modes]
    _refuse_duplicates(parsed, listen_host, listen_port)
    held: list[socket.socket] = []
    out: list[str] = []
    given: dict[str, str] = {}
    default_port = listen_port
    try:
        for spec, mode in parsed:
            host = mode.listen_host(listen_host)
            port = mode.listen_port(listen_port)
            assert port is not None  # _parse refused modes without one
            if mode.custom_listen_port is None and default_port != 0:
                port = default_port
            if planned is not None:
                planned.release(host, port)
            chosen, socks = _hold(mode, host, port)
            held += socks
            if mode.custom_listen_port is None:
                default_port = chosen
                out.append(spec)
            else:
                out.append(with_port(spec, chosen))
            given[out[-1]] = spec
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return PortPlan(tuple(out), default_port, given, tuple(held))


def with_port(spec: str, port: int) -> str:
    """`spec` listening on `port`: the `@[HOST:]PORT` suffix rewritten, its host kept."""
    head, _, at = spec.rpartition("@")
    host, sep, _ = at.rpartition(":")
    return f"{head}@{host}{sep}{port}"


def _parse(spec: str) -> tuple[str, ProxyMode]:
    from mitmproxy.proxy.mode_specs import ProxyMode

    try:
        mode = ProxyMode.parse(spec)
    except ValueError as e:
        raise AddonError(f"the proxy did not start: invalid proxy mode {spec!r} ({e})") from e
    if mode.transport_protocol not in ("tcp", "both") or mode.listen_port() is None:
        raise AddonError(f"the proxy did not start: {spec} cannot be shared by workers; use --workers 1")
    return spec, mode


def _refuse_duplicates(parsed: list[tuple[str, ProxyMode]], listen_host: str, listen_port: int) -> None:
    """mitmproxy's own check (two listeners on one address), for the ports given as concrete."""
    seen: set[tuple[str, int]] = set()
    for spec, mode in parsed:
        key = (mode.listen_host(listen_host), mode.listen_port(listen_port) or 0)
        if key[1] and key in seen:
            raise AddonError(f"the proxy did not start: two listeners on {key[0] or '*'}:{key[1]} ({spec})")
        seen.add(key)


def _hold(mode: ProxyMode, host: str, port: int) -> tuple[int, list[socket.socket]]:
    """Bind every address of `host` on `port` (0: one free port for all of them): the port and the
    SO_REUSEPORT sockets that keep it."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    held: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            try:
                port = _probe(family, kind, proto, (addr[0], port, *addr[2:]))
                if mode.transport_protocol == "both":  # HTTP/3 too: worker 0 binds it, as mitmproxy would
                    _probe(family, socket.SOCK_DGRAM, 0, (addr[0], port, *addr[2:]))
                held.append(_reserve(family, kind, proto, (addr[0], port, *addr[2:])))
            except OSError as e:
                if held and family == socket.AF_INET6 and not host:
                    continue  # no IPv6 here: mitmproxy's wildcard listener falls back the same way
                where = f"{host or '*'}:{port}"
                raise AddonError(
                    f"the proxy did not start: {mode.description} failed to listen on {where}: "
                    f"{e.strerror or e}"
                ) from e
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return port, held


def _probe(family: int, kind: int, proto: int, addr: tuple[Any, ...]) -> int:
    """A plain bind, as mitmproxy's own: fails if anyone holds the address (SO_REUSEPORT or not)."""
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        probe.bind(addr)
        return int(probe.getsockname()[1])


def _reserve(family: int, kind: int, proto: int, addr: tuple[Any, ...]) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
    except BaseException:
        sock.close()
        raise
    return sock
