"""mitmproxy's TCP listeners as flightlog binds them: each client's stream held (`wire.departures`),
and, in a worker, the port shared with the other workers (SO_REUSEPORT).

Hooked on mitmproxy's `servers.changed` signal, sent once new server instances exist and before they
start: each gets a `listen` of its own doing what mitmproxy's does for TCP, with the client's stream
handed to mitmproxy through `Departures`. In a worker, a mode that also listens on UDP (a reverse
https listener takes HTTP/3 there) has its UDP side in one worker only (`udp`): mitmproxy's UDP
server cannot share a port. A transparent listener is left as mitmproxy makes it (it reads the
original destination off the very socket object). The signal holds its receivers weakly, so
whoever makes this keeps it for the proxy's life.
"""

from __future__ import annotations

import asyncio
from typing import Any

from addons.wire.departures import Departures

HELD_MODES = ("regular", "reverse", "upstream", "socks5")
"""Listeners whose client streams are held: those mitmproxy serves over plain TCP streams."""


class Listening:
    """Gives every TCP server instance of `servers` flightlog's `listen`."""

    def __init__(self, servers: Any, departures: Departures, *, reuse_port: bool, udp: bool = True) -> None:
        self.servers = servers
        self.departures = departures
        self.reuse_port = reuse_port
        self.udp = udp
        servers.changed.connect(self.patch)

    def patch(self) -> None:
        from mitmproxy.proxy.mode_servers import AsyncioServerInstance

        for instance in self.servers:
            if (
                isinstance(instance, AsyncioServerInstance)
                and instance.mode.type_name in HELD_MODES
                and "listen" not in vars(instance)
            ):
                instance.listen = self._listen(instance)  # type: ignore[method-assign]

    def _listen(self, instance: Any) -> Any:
        handle = self.departures.wrap(instance.handle_stream)
        reuse, udp = self.reuse_port, self.udp

        async def listen(host: str, port: int) -> list[Any]:
            if port == 0 and not host:  # one port for IPv4 and IPv6, as mitmproxy's own listen picks
                from mitmproxy.net.free_port import get_free_port

                port = get_free_port()
            servers: list[Any] = [await asyncio.start_server(handle, host, port, reuse_port=reuse or None)]
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
