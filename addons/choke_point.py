"""The choke point: nothing leaves through mitmproxy without the egress judge's verdict.

The last addon of the chain (`addons.master` adds it after every other; `running` checks that it
is). Its hooks run after every other addon's for the same event, at each point where mitmproxy is
about to forward something, and each asks one question: does this carry the judge's verdict
(`addons.verdicts`) for where it goes? What does not is refused and recorded as `policy.refused`
with rule `not judged`. So a listener, layer or message the judge (`addons.egress_policy`,
`addons.egress_connections`) was never asked about is refused by construction, not passed:

- `server_connect`: no upstream connection opens without the judge's verdict for its destination
  (every layer reaches the network through mitmproxy's one `open_connection`, which fires it);
- `http_connect`, `requestheaders` (a request whose body streams through unread goes upstream
  before `request`), `request`: an HTTP request on any listener, HTTP/1, HTTP/2 or HTTP/3, must
  carry an allowing verdict for the very host and port it now goes to;
- `websocket_message`: a message from the client must have been looked at;
- `tcp_message`, `udp_message`: a raw relay's flow must carry an allowing verdict; `next_layer`
  refuses a relay mitmproxy would run without a flow (no hooks would ever see its bytes);
- `dns_request`: a question must carry a verdict, else it is answered REFUSED.

mitmproxy swallows a hook's exception and goes on (`safecall`): every hook here refuses when its
own check fails to run, so a bug in it closes the path rather than opens it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from addons.flow_notes import CHOKE_REFUSED, EXCHANGE, VERDICT_MESSAGE
from addons.verdicts import NOT_JUDGED, Verdicts, of_flow
from egress.rules import Decision
from recording import identity as ident
from recording.action_ids import action_id, new_action_id
from recording.records import Exchange

if TYPE_CHECKING:
    from mitmproxy import dns, http, tcp, udp
    from mitmproxy.proxy import layer, server_hooks

log = logging.getLogger("flightlog.egress")

Record = Callable[[Exchange, Decision], None]
"""How a refusal is filed in the Ledger (the egress addon's `record_refusal`)."""
LIMIT: Final = "the egress judge left no verdict for it: what is not judged does not leave"
ERROR: Final = "flightlog: not judged by the egress policy"


def _refusal(what: str) -> Decision:
    return Decision("deny", NOT_JUDGED, f"{what}: {LIMIT}")


class ChokePoint:
    """Checks the judge's verdict at every point mitmproxy forwards (module docstring)."""

    def __init__(self, verdicts: Verdicts, record: Record) -> None:
        self.verdicts = verdicts
        self.record = record

    def running(self) -> None:
        """Say so if another addon runs after this one: what its hooks change is not checked (as
        under `mitmdump -s`, where a script's addons run before mitmproxy's own)."""
        from mitmproxy import ctx

        chain = ctx.master.addons.chain
        if chain and chain[-1] is not self:
            log.warning("flightlog: the egress choke point is not the last addon: %r follows it", chain[-1])

    # -- connections -----------------------------------------------------------------------------

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """No upstream connection opens without the judge's verdict for its destination."""
        server = data.server
        try:
            verdict = self.verdicts.take(server)
            if verdict is not None and verdict.allowed:
                return
            if verdict is not None:  # refused by the judge, which filed it: make sure it stays shut
                server.error = server.error or f"flightlog: refused by rule {verdict.rule}"
                return
        except Exception:  # the check itself failed: refuse
            log.exception("flightlog: the choke point's check failed")
        server.error = ERROR
        host, port = server.address or ("", 0)
        self._file("CONNECT", f"{host}:{port}", str(host), ident.EMPTY, new_action_id(), "a connection")

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        """A raw relay without a flow (mitmproxy's ignored hosts) would pass bytes no hook sees."""
        try:
            from mitmproxy.proxy.layers import TCPLayer, UDPLayer

            chosen = nextlayer.layer
            if not isinstance(chosen, TCPLayer | UDPLayer) or chosen.flow is not None:
                return
        except Exception:
            log.exception("flightlog: the choke point's check failed")
        from addons.egress_connections import closing_layer

        context = nextlayer.context
        nextlayer.layer = closing_layer(context)
        host, port = context.server.address or ("", 0)
        self._file(
            "RELAY", f"{host}:{port}", str(host), ident.EMPTY, new_action_id(), "a relay without a flow"
        )

    # -- HTTP --------------------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            self._check_request(flow, "a tunnel")

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """A request whose body is streamed goes upstream before `request`: checked now."""
        if flow.request.stream and flow.response is None:
            self._check_request(flow, "a request")

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            self._check_request(flow, "a request")

    def _check_request(self, flow: http.HTTPFlow, what: str) -> None:
        try:
            if not flow.killable:  # killed: goes nowhere
                return
            request = flow.request
            verdict = of_flow(flow)
            if verdict is not None and verdict.covers(request.host, request.port):
                return
        except Exception:
            log.exception("flightlog: the choke point's check failed")
        self._refuse_request(flow, what)

    def _refuse_request(self, flow: http.HTTPFlow, what: str) -> None:
        from mitmproxy import http

        request = flow.request
        decision = _refusal(what)
        if request.stream:
            flow.kill()
        else:
            body = (
                b'{"error": {"type": "refused", "rule": "not judged", "message": "refused by flightlog: '
                + LIMIT.encode()
                + b'"}}'
            )
            flow.response = http.Response.make(403, body, {"Content-Type": "application/json"})
        where = f"{request.host}:{request.port}"
        self._file(request.method, where, request.host, _who(flow), _id(flow), what, decision)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A message from the client the judge did not look at is dropped."""
        ws = flow.websocket
        if ws is None or not ws.messages:
            return
        message = ws.messages[-1]
        try:
            if not message.from_client or message.dropped or VERDICT_MESSAGE.get(flow) is message:
                return
        except Exception:
            log.exception("flightlog: the choke point's check failed")
        message.drop()
        request = flow.request
        host = request.host
        self._file("WEBSOCKET", f"{host}:{request.port}", host, _who(flow), _id(flow), "a WebSocket message")

    # -- raw relays and DNS ----------------------------------------------------------------------

    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        self._relayed(flow, "TCP")

    def udp_message(self, flow: udp.UDPFlow) -> None:
        self._relayed(flow, "UDP")

    def _relayed(self, flow: tcp.TCPFlow | udp.UDPFlow, method: str) -> None:
        """A raw relay's bytes pass only with an allowing verdict on its flow; else none pass."""
        if _allowed(flow):
            return
        for message in flow.messages[-1:]:
            message.content = b""
        if CHOKE_REFUSED.get(flow):
            return
        CHOKE_REFUSED.put(flow, True)
        host, port = flow.server_conn.address or ("", 0)
        url = f"{method.lower()}://{host}:{port}"
        self._file(method, url, str(host), ident.EMPTY, _id(flow), f"a {method} relay")

    def dns_request(self, flow: dns.DNSFlow) -> None:
        if flow.response is not None or _allowed(flow):
            return
        from mitmproxy.net.dns import response_codes

        flow.response = flow.request.fail(response_codes.REFUSED)
        name = flow.request.questions[0].name if flow.request.questions else ""
        self._file("DNS", f"dns:{name}", name, ident.EMPTY, _id(flow), "a DNS question")

    # -- filing ------------------------------------------------------------------------------------

    def _file(
        self,
        method: str,
        url: str,
        host: str,
        who: ident.Identity,
        flow_id: str,
        what: str,
        decision: Decision | None = None,
    ) -> None:
        decision = decision or _refusal(what)
        log.warning("flightlog: refused %s %s: %s", method, url, decision.limit)
        try:
            self.record(Exchange(flow_id, "out", method, url, host, who), decision)
        except Exception:  # the refusal stands whether or not it could be filed
            log.exception("flightlog: a refusal could not be filed")


def _allowed(flow: Any) -> bool:
    """Whether the flow carries an allowing verdict; a check that fails is a refusal (logged)."""
    try:
        verdict = of_flow(flow)
        return verdict is not None and verdict.allowed
    except Exception:
        log.exception("flightlog: the choke point's check failed")
        return False


def _who(flow: http.HTTPFlow) -> ident.Identity:
    exchange = EXCHANGE.get(flow)
    found = getattr(exchange, "identity", None)
    return found if isinstance(found, ident.Identity) else ident.EMPTY


def _id(flow: Any) -> str:
    return action_id(flow.id, flow.timestamp_created)
