"""A forward request for one of this proxy's own reverse listeners is served as that listener would
serve it, with no second hop.

`flightlog run` sets both the proxy variables and base URLs such as `OPENAI_BASE_URL` pointing at
the reverse listeners. A client that honours both (httpx and so the Python SDKs, Node with
`NODE_USE_ENV_PROXY=1`) sends the base-URL request through the forward listener. Passed on as a
second hop to the reverse listener, the forward side would buffer the whole answer (a stream held
back until its end) and time it; so instead the forward listener takes the request as the reverse
listener would: its target becomes the listener's (scheme, host, port, and the `Host` header unless
`keep_host_header`), and the capture then records it once, identity prefix and all, streamed like
any other (`flightlog.as_listener` in the flow's metadata names the listener's mode). A CONNECT to
the listener (Node's proxy agent tunnels plain HTTP too) is pointed at the listener's target, and
each request inside it is taken the same way.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from addons.flow_notes import AS_LISTENER

if TYPE_CHECKING:
    from mitmproxy import connection, http
    from mitmproxy.proxy.mode_specs import ReverseMode

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
WEB_SCHEMES = frozenset({"http", "https"})


class ListenerHops:
    """Knows the reverse listeners once the proxy runs; turns a forward request for one of them into
    that listener's request."""

    def __init__(self) -> None:
        self._reverse: dict[tuple[str, int], ReverseMode] = {}
        self._tunnels: weakref.WeakKeyDictionary[connection.Client, ReverseMode] = weakref.WeakKeyDictionary()

    def running(self) -> None:
        from mitmproxy import ctx
        from mitmproxy.proxy.mode_specs import ReverseMode

        server = ctx.master.addons.get("proxyserver")
        found: dict[tuple[str, int], ReverseMode] = {}
        for instance in getattr(server, "servers", ()):
            mode = instance.mode
            if isinstance(mode, ReverseMode) and mode.scheme in WEB_SCHEMES:
                for host, port, *_ in instance.listen_addrs:
                    found[(str(host), int(port))] = mode
        self._reverse = found

    def listener_at(self, host: str, port: int) -> ReverseMode | None:
        """The reverse listener a target names: its own address, or any loopback name for it when it
        listens on loopback or every address."""
        if not self._reverse:
            return None
        for (listen_host, listen_port), mode in self._reverse.items():
            if port == listen_port and (
                host == listen_host or (host in LOOPBACK and listen_host in (*LOOPBACK, "0.0.0.0", "::", ""))
            ):
                return mode
        return None

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """A tunnel to a reverse listener goes to its target; its requests are taken in `requestheaders`."""
        if not self._regular(flow):
            return
        mode = self.listener_at(flow.request.host, flow.request.port)
        if mode is not None:
            self._tunnels[flow.client_conn] = mode
            host, port = mode.address
            flow.request.data.host, flow.request.data.port = host, port
            shown = f"[{host}]" if ":" in host else host
            flow.request.authority = f"{shown}:{port}"  # recorded as the tunnel it became

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if not self._reverse or not self._regular(flow):
            return
        request = flow.request
        mode = self._tunnels.get(flow.client_conn) if self._tunnels else None
        if mode is None:
            mode = self.listener_at(request.data.host, request.data.port)
        if mode is not None:
            as_listener(flow, mode)

    @staticmethod
    def _regular(flow: http.HTTPFlow) -> bool:
        from mitmproxy.proxy.mode_specs import RegularMode

        return isinstance(flow.client_conn.proxy_mode, RegularMode)


def as_listener(flow: http.HTTPFlow, mode: ReverseMode) -> None:
    """Point `flow`'s request where the reverse listener `mode` sends its own, as mitmproxy's reverse
    mode does (the `Host` header rewritten unless `keep_host_header`)."""
    from mitmproxy import ctx
    from mitmproxy.net.http import url

    request = flow.request
    host, port = mode.address
    request.scheme = mode.scheme
    request.data.host, request.data.port = host, port
    if not ctx.options.keep_host_header:
        request.host_header = url.hostport(mode.scheme, host, port)
    AS_LISTENER.put(flow, mode)
