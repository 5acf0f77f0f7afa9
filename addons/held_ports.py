"""Listening addresses bound before mitmproxy starts, kept until a listener takes them.

`flightlog proxy` fixes every port in the CLI (`flightlog.ports`) so that `proxy.json` and the model
APIs' base URLs name them before the proxy runs. A port merely checked and released there is free for
anyone in the seconds mitmproxy takes to start (under load, another proxy's pick took one: "address
already in use"). So each planned address stays bound by this process, not listening (it takes no
connection), and is handed over: a lone proxy listens on the very socket (`addons.listening`), the
workers' supervisor releases it just before binding its own (`addons.shared_ports`), and a listener
flightlog does not serve itself gets its address released just before mitmproxy binds it.

A port chosen here (`--listen HOST:0`, `--mode ...@0`) is bound exclusively (no SO_REUSEADDR), so no
other socket can share it, not even one that asks for address reuse; a port the user named is bound
as mitmproxy binds it (SO_REUSEADDR: a restart beside the last run's TIME_WAIT connections works).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

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
