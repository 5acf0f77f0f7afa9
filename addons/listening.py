"""mitmproxy's TCP listeners as flightlog binds them: each client's stream held (`wire.departures`),
and, in a worker, the port shared with the other workers (SO_REUSEPORT).

Hooked on mitmproxy's `servers.changed` signal, sent once new server instances exist and before they
start: each gets a `listen` of its own doing what mitmproxy's does for TCP, with the client's stream
handed to mitmproxy through `Departures`. In a worker, a mode that also listens on UDP (a reverse
https listener takes HTTP/3 there) has its UDP side in one worker only (`udp`): mitmproxy's UDP
server cannot share a port. A transparent listener is left as mitmproxy makes it (it reads the
original destination off the very socket object). The signal holds its receivers weakly, so
whoever makes this keeps it for the proxy's life.

An address the CLI planned and still holds (`addons.held_ports`) is listened on through the very
socket it bound, so nothing can take the port between the plan and the listen; a listener mitmproxy
serves itself gets its held address released just before mitmproxy binds it.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from addons.held_ports import HeldPorts
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
