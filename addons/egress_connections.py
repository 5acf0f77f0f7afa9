"""The egress policy for what a sealed command sends that is not an HTTP request.

mitmproxy's TUN mode (`flightlog run --sealed`) ends every connection and datagram the command
sends in the proxy. HTTP (and TLS around it) goes on to the request hooks (`addons.egress_policy`);
here is the rest:

- a DNS question for a name the policy refuses outright (`Policy.judge_host`) is answered REFUSED,
  so a name cannot carry data out either; the others are answered as mitmproxy answers them;
- a connection that is not HTTP (raw TCP, UDP other than DNS) cannot be judged or recorded: instead
  of the relay mitmproxy would choose (`next_layer`), it gets a layer that closes both sides before a
  byte is forwarded (`flow.kill()` would not stop a TCP relay), and the refusal is recorded (rule
  `protocol`). mitmproxy connects eagerly, so the TCP handshake with the destination may have happened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from egress.rules import Call, Decision
from recording import identity as ident
from recording.action_ids import action_id, new_action_id
from recording.records import Exchange

if TYPE_CHECKING:
    from mitmproxy import connection, dns
    from mitmproxy.proxy import context as mcontext
    from mitmproxy.proxy import layer

    from egress.judge import Gate

PROTOCOL: Final = "protocol"


class Owner(Protocol):
    """What these hooks need of the egress addon: its gate, the sealed command's identity, and the
    way a refusal is recorded."""

    gate: Gate | None
    tun_identity: ident.Identity

    def record_refusal(
        self,
        exchange: Exchange,
        decision: Decision,
        status: int | None,
        tool: str | None,
        body: bytes,
        attempt: bool = False,
    ) -> None: ...


class EgressConnections:
    """An addon of its own beside `Flightlog` (whose parts see HTTP hooks only)."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        """Refuse a sealed command's connection mitmproxy would relay raw (module docstring)."""
        from mitmproxy.proxy.layers import TCPLayer, UDPLayer

        chosen = nextlayer.layer
        context = nextlayer.context
        if not isinstance(chosen, TCPLayer | UDPLayer) or not from_tun(context.client):
            return
        method, what = ("TCP", "a connection that is not HTTP")
        if isinstance(chosen, UDPLayer):
            method, what = ("UDP", "UDP other than DNS")
        nextlayer.layer = _closing_layer(context)
        host, port = context.server.address or ("", 0)
        decision = Decision("deny", PROTOCOL, f"{what} cannot be carried through flightlog")
        url = f"{method.lower()}://{host}:{port}"
        exchange = Exchange(new_action_id(), "out", method, url, str(host), self.owner.tun_identity)
        self.owner.record_refusal(exchange, decision, None, None, b"", attempt=True)

    def dns_request(self, flow: dns.DNSFlow) -> None:
        """Refuse a sealed command's question for a name the policy refuses outright."""
        gate = self.owner.gate
        if gate is None or gate.idle or not flow.request.questions or not from_tun(flow.client_conn):
            return
        from mitmproxy.net.dns import response_codes

        who = self.owner.tun_identity
        for question in flow.request.questions:
            call = Call("dns", question.name, None, "DNS", "", who.agent, who.session, who.task)
            decision = gate.live.policy.judge_host(call)
            if decision is not None and decision.action == "deny":
                flow.response = flow.request.fail(response_codes.REFUSED)
                flow_id = action_id(flow.id, flow.timestamp_created)
                exchange = Exchange(flow_id, "out", "DNS", f"dns:{call.host}", call.host, who)
                self.owner.record_refusal(exchange, decision, None, None, b"", attempt=True)
                return


def from_tun(client: connection.Client) -> bool:
    """Whether a connection came through a TUN listener (a sealed command's)."""
    from mitmproxy.proxy.mode_specs import TunMode

    return isinstance(client.proxy_mode, TunMode)


def _closing_layer(context: mcontext.Context) -> layer.Layer:
    """A layer that closes both sides at once: what a refused raw connection gets instead of a relay."""
    from mitmproxy.connection import ConnectionState
    from mitmproxy.proxy import commands, events
    from mitmproxy.proxy import layer as mlayer

    class Closing(mlayer.Layer):
        def _handle_event(self, event: events.Event) -> mlayer.CommandGenerator[None]:
            if isinstance(event, events.Start):
                yield commands.CloseConnection(self.context.client)
                if self.context.server.state is not ConnectionState.CLOSED:
                    yield commands.CloseConnection(self.context.server)

    return Closing(context)
