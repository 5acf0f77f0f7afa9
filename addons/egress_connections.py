"""The egress judge for what is not an HTTP request: connections, raw relays, DNS questions.

Each hook leaves its verdict (`addons.verdicts`) for the choke point (`addons.choke_point`), which
refuses what carries none. On every listener (forward, reverse, model API listeners, a sealed
command's TUN):

- an upstream connection about to open (`server_connect`): allowed when a request or tunnel
  judged before it was allowed to that destination, else judged by its host and port alone
  (`Policy.judge_host`): a host refused outright gets no connection;
- a raw relay mitmproxy chooses (`next_layer`: TCP after a CONNECT or from the TUN, UDP, QUIC that
  is not HTTP/3, TLS around something that is not HTTP): judged as `protocol = "tcp"` or `"udp"`
  (`"quic"` inside QUIC) by host and port. A refused one gets a layer that closes both sides
  before a byte is forwarded (`flow.kill()` would not stop a TCP relay), recorded as refused. Such
  a stream cannot be recorded yet, so from a sealed command's TUN only a rule naming it allows it
  (not the default); elsewhere the policy's default applies, and with no policy it passes;
- a DNS question: judged by its name; one the policy refuses is answered REFUSED, so a name cannot
  carry data out either; a sealed command's allowed question is answered by flightlog (mitmproxy's
  resolver, or this machine's name server), never by the address the command sent it to; on other
  listeners an allowed question goes on to the resolver it was sent to (that connection is
  permitted by the question's verdict) unless a rule refuses the resolver itself.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final, Protocol

from addons.flow_notes import VERDICT
from addons.verdicts import NO_POLICY, Verdict, Verdicts
from egress.policy import DEFAULT
from egress.rules import Call, Decision, Kind
from recording import identity as ident
from recording.action_ids import action_id, new_action_id
from recording.records import Exchange

if TYPE_CHECKING:
    from mitmproxy import connection, dns
    from mitmproxy.proxy import context as mcontext
    from mitmproxy.proxy import layer, server_hooks

    from egress.judge import Gate

PROTOCOL: Final = "protocol"


class Owner(Protocol):
    """What these hooks need of the egress addon: its gate, the sealed command's identity, the
    connection verdicts, and the way a refusal is recorded."""

    gate: Gate | None
    tun_identity: ident.Identity
    verdicts: Verdicts

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

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """Judge an upstream connection about to open (module docstring)."""
        server = data.server
        if server.error or server.address is None:
            return
        host, port = str(server.address[0]), int(server.address[1])
        verdicts = self.owner.verdicts
        gate = self.owner.gate
        if verdicts.permitted(data.client, host, port) or gate is None or gate.idle:
            verdicts.connection(server, Verdict("allow", NO_POLICY, host, port))
            return
        who = self._who(data.client)
        call = Call("connect", host, port, "CONNECT", "", who.agent, who.session, who.task)
        decision = gate.live.policy.judge_host(call)
        if decision is not None and decision.refused:
            verdicts.connection(server, Verdict("deny", decision.rule, host, port))
            server.error = f"flightlog: refused by rule {decision.rule}"
            exchange = Exchange(new_action_id(), "out", "CONNECT", f"{host}:{port}", call.host, who)
            self.owner.record_refusal(exchange, decision, None, None, b"", attempt=True)
            return
        verdicts.connection(
            server, Verdict("allow", decision.rule if decision else "judged inside", host, port)
        )

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        """Judge a raw relay mitmproxy chose (module docstring)."""
        from mitmproxy.proxy.layers import TCPLayer, UDPLayer

        chosen = nextlayer.layer
        if not isinstance(chosen, TCPLayer | UDPLayer) or chosen.flow is None:
            return  # a relay without a flow: the choke point refuses it
        context = nextlayer.context
        kind: Kind = "tcp" if isinstance(chosen, TCPLayer) else "udp"
        if any(type(x).__name__ == "QuicStreamLayer" for x in context.layers):
            kind = "quic"
        host, port = context.server.address or ("", 0)
        tun = from_tun(context.client)
        who = self._who(context.client)
        gate = self.owner.gate
        if gate is None or gate.idle:
            decision = _NOT_CARRIED[kind] if tun else Decision("allow", NO_POLICY, "no policy")
        else:
            call = Call(kind, str(host), int(port), kind.upper(), "", who.agent, who.session, who.task)
            decision = gate.live.policy.judge(call)
            if tun and decision.action == "allow" and decision.rule == DEFAULT:
                decision = _NOT_CARRIED[kind]  # a stream that cannot be recorded: only a rule allows it
            elif decision.action == "ask":
                decision = Decision("deny", decision.rule, decision.limit + " (a raw stream cannot wait)")
        if decision.action == "allow":
            VERDICT.put(chosen.flow, Verdict("allow", decision.rule, str(host), int(port)))
            return
        nextlayer.layer = closing_layer(context)
        url = f"{kind}://{host}:{port}"
        exchange = Exchange(new_action_id(), "out", kind.upper(), url, str(host), who)
        self.owner.record_refusal(exchange, decision, None, None, b"", attempt=True)

    def dns_request(self, flow: dns.DNSFlow) -> Awaitable[None] | None:
        """Judge a DNS question by its name(s); one refused is answered REFUSED. A sealed command's
        question the policy allows is answered by flightlog (`_answer_here`)."""
        if self._judge_question(flow) and from_tun(flow.client_conn):
            return self._answer_here(flow)
        return None

    def _judge_question(self, flow: dns.DNSFlow) -> bool:
        """Leave the question's verdict; whether it is allowed."""
        gate = self.owner.gate
        questions = flow.request.questions
        if gate is None or gate.idle or not questions:
            VERDICT.put(flow, Verdict("allow", NO_POLICY))
            return True
        from mitmproxy.net.dns import response_codes

        who = self._who(flow.client_conn)
        resolver = self._resolver(flow, gate, who)
        for question in questions:
            call = Call("dns", question.name, None, "DNS", "", who.agent, who.session, who.task)
            decision = gate.live.policy.judge_host(call) if resolver is None else resolver
            if decision is not None and decision.action == "ask":  # a question cannot wait for one
                decision = Decision("deny", decision.rule, decision.limit + " (a DNS question cannot wait)")
            if decision is not None and decision.action == "deny":
                flow.response = flow.request.fail(response_codes.REFUSED)
                VERDICT.put(flow, Verdict("deny", decision.rule))
                flow_id = action_id(flow.id, flow.timestamp_created)
                exchange = Exchange(flow_id, "out", "DNS", f"dns:{call.host}", call.host, who)
                self.owner.record_refusal(exchange, decision, None, None, b"", attempt=True)
                return False
        VERDICT.put(flow, Verdict("allow", "dns"))
        if flow.server_conn.address is not None:  # the resolver carries a question judged by its name
            host, port = flow.server_conn.address
            self.owner.verdicts.permit(flow.client_conn, str(host), int(port))
        return True

    async def _answer_here(self, flow: dns.DNSFlow) -> None:
        """A sealed command's question, to whatever address it was sent, is answered by flightlog:
        an address lookup by mitmproxy's resolver (as its DNS mode answers), any other question
        asked of this machine's name server instead of the one the command chose."""
        from mitmproxy import ctx
        from mitmproxy import dns as mdns
        from mitmproxy.net.dns import response_codes

        resolver = ctx.master.addons.get("dnsresolver")
        request = flow.request
        question = request.question
        lookup = question is not None and question.class_ == mdns.classes.IN
        if resolver is None:
            flow.response = request.fail(response_codes.REFUSED)
            return
        if (
            lookup
            and request.query
            and question is not None
            and question.type in (mdns.types.A, mdns.types.AAAA)
        ):
            try:
                flow.response = await resolver.resolve(request)
            except Exception:  # no name server and no hosts file: a failure, not the command's server
                flow.response = request.fail(response_codes.SERVFAIL)
            return
        servers = resolver.name_servers()
        if not servers:
            flow.response = request.fail(response_codes.SERVFAIL)
            return
        flow.server_conn.address = (servers[0], 53)
        self.owner.verdicts.permit(flow.client_conn, servers[0], 53)

    @staticmethod
    def _resolver(flow: dns.DNSFlow, gate: Gate, who: ident.Identity) -> Decision | None:
        """A rule refusing the resolver a question is sent to (not the default: the question is
        judged by its name), as the refusal of the question; else None."""
        if flow.server_conn.address is None:
            return None
        host, port = flow.server_conn.address
        call = Call("connect", str(host), int(port), "DNS", "", who.agent, who.session, who.task)
        decision = gate.live.policy.judge_host(call)
        if decision is not None and decision.refused and decision.rule != DEFAULT:
            return decision
        return None

    def _who(self, client: connection.Client) -> ident.Identity:
        return self.owner.tun_identity if from_tun(client) else ident.EMPTY


_NOT_CARRIED: Final[dict[str, Decision]] = {
    kind: Decision("deny", PROTOCOL, f"{what} cannot be carried through flightlog unless a rule allows it")
    for kind, what in (
        ("tcp", "a connection that is not HTTP"),
        ("udp", "UDP other than DNS"),
        ("quic", "QUIC that is not HTTP/3"),
    )
}


def from_tun(client: connection.Client) -> bool:
    """Whether a connection came through a TUN listener (a sealed command's)."""
    from mitmproxy.proxy.mode_specs import TunMode

    return isinstance(client.proxy_mode, TunMode)


def closing_layer(context: mcontext.Context) -> layer.Layer:
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
