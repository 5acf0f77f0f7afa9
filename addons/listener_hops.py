"""A forward request to one of this proxy's own reverse listeners is let through, not refused.

`flightlog run` sets both the proxy variables and base URLs such as `OPENAI_BASE_URL` pointing at
the reverse listeners. A client that honours both (httpx and so the Python SDKs, Node with
`NODE_USE_ENV_PROXY=1`) sends the base-URL request through the forward listener, and mitmproxy
refuses any connection to its own listen addresses ("Request destination unknown") to stop loops.
A hop from the forward listener to a reverse listener cannot loop (the reverse listener forwards to
its target, and its own connections keep mitmproxy's check), so for exactly that hop the refusal is
lifted. The hop itself is not recorded (`addons.capture` skips our own ports); the reverse listener
records the exchange once, with the identity from its path prefix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mitmproxy.proxy import server_hooks

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
REFUSAL = "Request destination unknown."


class ListenerHops:
    """Knows the reverse listeners' addresses once the proxy runs; lifts the self-connect refusal
    for a forward client going to one of them."""

    def __init__(self) -> None:
        self._reverse: frozenset[tuple[str, int]] = frozenset()

    def running(self) -> None:
        from mitmproxy import ctx
        from mitmproxy.proxy.mode_specs import ReverseMode

        server = ctx.master.addons.get("proxyserver")
        found: set[tuple[str, int]] = set()
        for instance in getattr(server, "servers", ()):
            if isinstance(instance.mode, ReverseMode):
                found.update((str(host), int(port)) for host, port, *_ in instance.listen_addrs)
        self._reverse = frozenset(found)

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        from mitmproxy.proxy.mode_specs import RegularMode

        error = data.server.error or ""
        if not error.startswith(REFUSAL) or not isinstance(data.client.proxy_mode, RegularMode):
            return
        assert data.server.address is not None
        host, port = str(data.server.address[0]), int(data.server.address[1])
        if any(port == p and (host in LOOPBACK or host == h) for h, p in self._reverse):
            data.server.error = None
