"""mitmproxy's TCP listeners as flightlog binds them: each client's stream held (`wire.departures`),
and, in a worker, the port shared with the other workers (SO_REUSEPORT).

Hooked on mitmproxy's `servers.changed` signal, sent once new server instances exist and before they
start: each gets a `listen` of its own doing what mitmproxy's does for TCP, with the client's stream
handed to mitmproxy through `Departures`. In a worker, a mode that also listens on UDP (a reverse
https listener takes HTTP/3 there) has its UDP side in one worker only (`udp`): mitmproxy's UDP
server cannot share a port. A transparent listener is left as mitmproxy makes it (it reads the
original destination off the very socket object). The signal holds its receivers weakly, so
whoever makes this keeps it for the proxy's life.

A port the CLI plans (`flightlog.ports`) stays bound by the proxy process, not listening (it takes no
connection), from the plan until a listener takes it (`HeldPorts`): a port merely checked and let go
was anyone's in the seconds mitmproxy takes to start (under load another proxy's pick took one:
"address already in use"). A lone proxy listens on the very socket; the workers' supervisor releases
each just before binding its own (`addons.shared_ports`); a listener mitmproxy serves itself gets its
address released just before mitmproxy binds it. A port chosen for `HOST:0` is bound exclusively (no
SO_REUSEADDR: no other socket can share it, not even one asking for address reuse); one the user
named is bound so when it can, else as mitmproxy binds it (the last run's TIME_WAIT connections).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from dataclasses import dataclass, field
from typing import Any

from addons.wire.departures import Departures

NO_IPV6 = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT)


def bind_all(host: str, port: int, *, exclusive: bool) -> list[socket.socket]:
    """Every address asyncio's `start_server(host, port)` would listen on, bound now (IPv6 with
    V6ONLY, as asyncio does; a wildcard without IPv6 on this machine keeps its IPv4 socket). The
    first failure closes what was bound and is raised."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, given in dict.fromkeys(infos):
            addr = (given[0], port, *given[2:])  # port 0: the first address's port for the others
            sock = socket.socket(family, kind, proto)
            try:
                if not exclusive:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
            except OSError as e:
                sock.close()
                if bound and not host and family == socket.AF_INET6 and e.errno in NO_IPV6:
                    continue
                raise
            bound.append(sock)
            port = int(sock.getsockname()[1])
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


@dataclass
class HeldPorts:
    """Bound, not listening sockets by the (host, port) a listener will ask for."""

    held: dict[tuple[str, int], list[socket.socket]] = field(default_factory=dict)

    def add(self, host: str, port: int, sockets: list[socket.socket]) -> None:
        self.held.setdefault((host, port), []).extend(sockets)

    def take(self, host: str, port: int) -> list[socket.socket]:
        """The sockets held for (host, port), now the caller's (none: bind it yourself)."""
        return self.held.pop((host, port), [])

    def release(self, host: str, port: int) -> None:
        """Close what is held for (host, port): whoever binds it next does so at once."""
        for sock in self.take(host, port):
            sock.close()

    def close(self) -> None:
        for host, port in list(self.held):
            self.release(host, port)

    @property
    def ports(self) -> list[int]:
        return [port for _, port in self.held]


HELD_MODES = ("regular", "reverse", "upstream", "socks5")
"""Listeners whose client streams are held: those mitmproxy serves over plain TCP streams."""


class Listening:
    """Gives every TCP server instance of `servers` flightlog's `listen`."""

    def __init__(self, servers: Any, departures: Departures, *, reuse_port: bool, udp: bool = True) -> None:
        self.servers = servers
        self.departures = departures
        self.reuse_port = reuse_port
        self.udp = udp
        self.held = HeldPorts()
        servers.changed.connect(self.patch)

    def patch(self) -> None:
        from mitmproxy import ctx
        from mitmproxy.proxy.mode_servers import AsyncioServerInstance

        for instance in self.servers:
            if not (
                isinstance(instance, AsyncioServerInstance)
                and instance.mode.type_name in HELD_MODES
                and instance.mode.transport_protocol in ("tcp", "both")  # reverse:udp, :dtls, :quic: UDP only
            ):
                mode = instance.mode
                port = mode.listen_port(ctx.options.listen_port)
                if port is not None:
                    self.held.release(mode.listen_host(ctx.options.listen_host), port)
            elif "listen" not in vars(instance):
                instance.listen = self._listen(instance)  # type: ignore[method-assign]

    def _listen(self, instance: Any) -> Any:
        handle = self.departures.wrap(instance.handle_stream)
        reuse, udp = self.reuse_port, self.udp

        async def listen(host: str, port: int) -> list[Any]:
            if port == 0 and not host:  # one port for IPv4 and IPv6, as mitmproxy's own listen picks
                from mitmproxy.net.free_port import get_free_port

                port = get_free_port()
            servers: list[Any] = await _on_held(handle, self.held.take(host, port))
            if not servers:
                servers.append(await asyncio.start_server(handle, host, port, reuse_port=reuse or None))
            if udp and instance.mode.transport_protocol == "both":
                port = servers[0].sockets[0].getsockname()[1]
                try:
                    servers.append(await instance.start_udp_based_server(host or "0.0.0.0", port))
                except OSError:
                    for server in servers:
                        server.close()
                    raise
            return servers

        return listen


async def _on_held(handle: Any, held: list[socket.socket]) -> list[Any]:
    """A server on each held socket (listening from now on, with SO_REUSEADDR as asyncio's own
    listeners have it, so a restart beside this run's TIME_WAIT connections binds); all or none."""
    servers: list[Any] = []
    try:
        for sock in held:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            servers.append(await asyncio.start_server(handle, sock=sock))
    except BaseException:
        for server in servers:
            server.close()
        for sock in held:
            sock.close()
        raise
    return servers
