"""Every layer mitmproxy can hand over, and every hook it fires, is accounted for at the choke point.

The layer classes are enumerated from `mitmproxy.proxy.layers` (every module under it), not listed:
a mitmproxy that adds a layer fails `test_every_layer_is_covered` until someone says which hook
judges it. The same for hooks (`mitmproxy.hooks.all_hooks`): each either forwards something (the
choke point implements it and checks the verdict) or only observes (and the reason is written).

Then the choke point itself, on mitmproxy's own flow objects: what carries no verdict is refused and
filed as `not judged`, what carries one for its destination passes, a verdict for another
destination does not count, and a check that fails refuses.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

from addons.choke_point import ERROR, ChokePoint
from addons.egress_connections import EgressConnections
from addons.flow_notes import VERDICT, VERDICT_MESSAGE
from addons.verdicts import NOT_JUDGED, Verdict, Verdicts
from egress.rules import Decision
from recording.records import Exchange

COVERED: dict[str, tuple[str, ...]] = {
    # the listeners' top layers: what they carry is handed to the layers below; their own
    # upstream connections (reverse target, transparent/TUN destination, upstream proxy) open
    # through server_connect
    "modes.DestinationKnown": ("server_connect",),
    "modes.HttpProxy": ("http_connect", "server_connect"),
    "modes.HttpUpstreamProxy": ("http_connect", "server_connect"),
    "modes.ReverseProxy": ("server_connect",),
    "modes.Socks5Proxy": ("server_connect",),
    "modes.TransparentProxy": ("server_connect",),
    # HTTP of every version: each request before it goes upstream
    "http.HttpLayer": ("requestheaders", "request", "http_connect"),
    "http.HttpStream": ("requestheaders", "request"),
    "http.HttpClient": ("server_connect",),
    "http._base.HttpConnection": ("requestheaders", "request"),
    "http._http1.Http1Connection": ("requestheaders", "request"),
    "http._http1.Http1Client": ("requestheaders", "request"),
    "http._http1.Http1Server": ("requestheaders", "request"),
    "http._http2.Http2Connection": ("requestheaders", "request"),
    "http._http2.Http2Client": ("requestheaders", "request"),
    "http._http2.Http2Server": ("requestheaders", "request"),
    "http._http3.Http3Connection": ("requestheaders", "request"),
    "http._http3.Http3Client": ("requestheaders", "request"),
    "http._http3.Http3Server": ("requestheaders", "request"),
    "http._upstream_proxy.HttpUpstreamProxy": ("http_connect", "request", "server_connect"),
    "websocket.WebsocketLayer": ("websocket_message",),
    # TLS carries what the layer inside it carries (judged there); its connection opens through
    # server_connect; a TLS stream that is not HTTP is a TCP relay inside (tcp_message)
    "tls.TLSLayer": ("server_connect", "tcp_message"),
    "tls.ClientTLSLayer": ("server_connect", "tcp_message"),
    "tls.ServerTLSLayer": ("server_connect", "tcp_message"),
    "tls.MockTLSLayer": ("server_connect",),
    # raw relays: their flow's verdict, and a relay without a flow refused at next_layer
    "tcp.TCPLayer": ("next_layer", "tcp_message"),
    "udp.UDPLayer": ("next_layer", "udp_message"),
    "dns.DNSLayer": ("dns_request", "server_connect"),
    # QUIC: HTTP/3 is HTTP above; a raw QUIC stream is a TCP relay, a datagram a UDP one
    "quic._raw_layers.RawQuicLayer": ("server_connect", "tcp_message", "udp_message"),
    "quic._raw_layers.QuicStreamLayer": ("next_layer", "tcp_message"),
    "quic._raw_layers.QuicStreamNextLayer": ("next_layer",),
    "quic._stream_layers.QuicLayer": ("server_connect",),
    "quic._stream_layers.ClientQuicLayer": ("server_connect",),
    "quic._stream_layers.ServerQuicLayer": ("server_connect",),
}
"""Each layer class (its module under `mitmproxy.proxy.layers`, and name) to the choke point's
hooks that check what it forwards."""

FORWARDS = {
    "server_connect",
    "http_connect",
    "requestheaders",
    "request",
    "websocket_message",
    "tcp_message",
    "udp_message",
    "dns_request",
    "next_layer",
}
"""The hooks after which mitmproxy sends something on: the choke point checks each."""
OBSERVES = {
    "add_log": "a log line",
    "client_connected": "a client arrived: nothing is sent upstream",
    "client_disconnected": "a client left",
    "configure": "options",
    "done": "shutdown",
    "load": "start-up",
    "running": "start-up (the choke point checks it is the last addon)",
    "update": "flows changed in the UI",
    "dns_error": "an answer failed: inbound",
    "dns_response": "an answer: inbound",
    "error": "a request failed: inbound",
    "response": "an answer: inbound",
    "responseheaders": "an answer: inbound",
    "http_connect_error": "a tunnel failed",
    "http_connect_upstream": "a CONNECT to the upstream proxy: its connection opens through server_connect",
    "http_connected": "a tunnel opened (through server_connect)",
    "quic_start_client": "TLS settings for QUIC: its connection opens through server_connect",
    "quic_start_server": "TLS settings for QUIC: its connection opens through server_connect",
    "server_connect_error": "a connection failed",
    "server_connected": "after server_connect",
    "server_disconnected": "a connection ended",
    "socks5_auth": "a SOCKS client's credentials: the connection opens through server_connect",
    "tcp_start": "before the first message (tcp_message carries the bytes)",
    "tcp_end": "a relay ended",
    "tcp_error": "a relay failed",
    "udp_start": "before the first datagram (udp_message carries the bytes)",
    "udp_end": "a relay ended",
    "udp_error": "a relay failed",
    "tls_clienthello": "mitmproxy makes its own ClientHello for the server, through server_connect",
    "tls_established_client": "a handshake with the client: inbound",
    "tls_established_server": "a handshake with the server, after server_connect",
    "tls_failed_client": "a handshake failed",
    "tls_failed_server": "a handshake failed",
    "tls_start_client": "TLS settings",
    "tls_start_server": "TLS settings, after server_connect",
    "websocket_start": "an upgrade's answer",
    "websocket_end": "a WebSocket ended",
}


def layer_classes() -> set[str]:
    """Every `Layer` subclass defined under `mitmproxy.proxy.layers`, as `module.Name` below it."""
    import mitmproxy.proxy.layers as package
    from mitmproxy.proxy.layer import Layer

    found = set()
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Layer) and cls.__module__.startswith(package.__name__ + "."):
                found.add(f"{cls.__module__.removeprefix(package.__name__ + '.')}.{cls.__qualname__}")
    return found


def test_every_layer_is_covered() -> None:
    """Each layer class mitmproxy has is in COVERED, by hooks the choke point implements."""
    layers = layer_classes()
    assert len(layers) >= 30, layers  # the enumeration found mitmproxy's layers
    assert layers - set(COVERED) == set(), "layers no hook judges"
    assert set(COVERED) - layers == set(), "COVERED names layers mitmproxy no longer has"
    for hooks in COVERED.values():
        for hook in hooks:
            assert hook in FORWARDS and callable(getattr(ChokePoint, hook)), hook


def test_every_hook_is_checked_or_only_observes() -> None:
    """Each hook mitmproxy fires either forwards (the choke point checks it) or only observes."""
    import mitmproxy.addons  # registers every hook
    import mitmproxy.proxy.layers  # noqa: F401  (its hooks too)
    from mitmproxy import hooks

    names = set(hooks.all_hooks)
    assert names - FORWARDS - set(OBSERVES) == set(), "hooks nobody has classified"
    assert FORWARDS & set(OBSERVES) == set()
    for hook in FORWARDS:
        assert callable(getattr(ChokePoint, hook)), hook
    judged = {"server_connect", "next_layer", "dns_request"}  # the judge's own connection hooks
    assert all(callable(getattr(EgressConnections, h)) for h in judged)


# -- the choke point on mitmproxy's own flows ------------------------------------------------------


class Filed:
    def __init__(self) -> None:
        self.refusals: list[tuple[Exchange, Decision]] = []

    def __call__(self, exchange: Exchange, decision: Decision) -> None:
        self.refusals.append((exchange, decision))


@pytest.fixture
def choke() -> tuple[ChokePoint, Filed]:
    filed = Filed()
    return ChokePoint(Verdicts(), filed), filed


def _http() -> Any:
    from mitmproxy.test import tflow

    flow = tflow.tflow()
    flow.response = None
    return flow


def test_an_unjudged_request_is_refused_and_filed(choke: tuple[ChokePoint, Filed]) -> None:
    point, filed = choke
    flow = _http()
    point.request(flow)
    assert flow.response is not None and flow.response.status_code == 403
    ((exchange, decision),) = filed.refusals
    assert decision.rule == NOT_JUDGED and exchange.host == flow.request.host


def test_a_judged_request_passes_only_to_the_destination_judged(choke: tuple[ChokePoint, Filed]) -> None:
    point, filed = choke
    flow = _http()
    VERDICT.put(flow, Verdict("allow", "r", flow.request.host, flow.request.port))
    point.request(flow)
    assert flow.response is None and not filed.refusals
    moved = _http()
    VERDICT.put(moved, Verdict("allow", "r", moved.request.host, moved.request.port))
    moved.request.host = "198.51.100.99"  # changed after the judgement
    point.request(moved)
    assert moved.response is not None and moved.response.status_code == 403
    denied = _http()
    VERDICT.put(denied, Verdict("deny", "r", denied.request.host, denied.request.port))
    point.request(denied)
    assert denied.response is not None and len(filed.refusals) == 2


def test_a_streamed_request_without_verdict_is_killed(choke: tuple[ChokePoint, Filed]) -> None:
    point, filed = choke
    flow = _http()
    flow.request.stream = True
    point.requestheaders(flow)
    assert flow.error is not None and not flow.killable
    assert [d.rule for _, d in filed.refusals] == [NOT_JUDGED]


def test_a_connection_without_verdict_does_not_open(choke: tuple[ChokePoint, Filed]) -> None:
    from mitmproxy.proxy import server_hooks
    from mitmproxy.test import tflow

    point, filed = choke
    unjudged = server_hooks.ServerConnectionHookData(tflow.tserver_conn(), tflow.tclient_conn())
    point.server_connect(unjudged)
    assert unjudged.server.error == ERROR and len(filed.refusals) == 1
    judged = server_hooks.ServerConnectionHookData(tflow.tserver_conn(), tflow.tclient_conn())
    point.verdicts.connection(judged.server, Verdict("allow", "r", "address", 22))
    point.server_connect(judged)
    assert judged.server.error is None and len(filed.refusals) == 1
    point.server_connect(judged)  # a verdict is taken once: the same connection again is not judged
    assert judged.server.error == ERROR


def test_raw_relays_and_dns_need_a_verdict(choke: tuple[ChokePoint, Filed]) -> None:
    from mitmproxy.test import tflow

    point, filed = choke
    tcp = tflow.ttcpflow()
    sent = tcp.messages[-1].content
    assert sent
    point.tcp_message(tcp)
    assert tcp.messages[-1].content == b""  # nothing of it is sent on
    allowed = tflow.ttcpflow()
    VERDICT.put(allowed, Verdict("allow", "git-ssh"))
    point.tcp_message(allowed)
    assert allowed.messages[-1].content == sent
    udp = tflow.tudpflow()
    point.udp_message(udp)
    assert udp.messages[-1].content == b""
    dns = tflow.tdnsflow()
    dns.response = None
    point.dns_request(dns)
    assert dns.response is not None and dns.response.response_code == 5  # REFUSED
    assert [d.rule for _, d in filed.refusals] == [NOT_JUDGED] * 3


def test_a_client_message_not_looked_at_is_dropped(choke: tuple[ChokePoint, Filed]) -> None:
    from mitmproxy.test import tflow

    point, filed = choke
    flow = tflow.twebsocketflow()
    assert flow.websocket is not None
    message = flow.websocket.messages[0]
    assert message.from_client
    flow.websocket.messages = [message]
    point.websocket_message(flow)
    assert message.dropped and len(filed.refusals) == 1
    looked = tflow.twebsocketflow()
    assert looked.websocket is not None
    looked.websocket.messages = looked.websocket.messages[:1]
    VERDICT_MESSAGE.put(looked, looked.websocket.messages[-1])
    point.websocket_message(looked)
    assert not looked.websocket.messages[-1].dropped


def test_a_check_that_fails_refuses(choke: tuple[ChokePoint, Filed]) -> None:
    """A verdict book that raises (a bug in the check) closes the connection, as no verdict does."""
    from mitmproxy.proxy import server_hooks
    from mitmproxy.test import tflow

    point, filed = choke

    class Broken(Verdicts):
        def take(self, server: Any) -> Verdict | None:
            raise RuntimeError("broken")

    point.verdicts = Broken()
    data = server_hooks.ServerConnectionHookData(tflow.tserver_conn(), tflow.tclient_conn())
    point.server_connect(data)
    assert data.server.error == ERROR and len(filed.refusals) == 1
