"""The egress policy addon: every call an agent sends is judged before it goes upstream.

A thin mitmproxy shell over `egress` (the rules engine, tested without a proxy). It judges exactly
what capture records (flows capture skips, the proxy's own routes and a hop between our own
listeners, are not judged twice), on every listener: forward, requests inside CONNECT tunnels,
reverse and model API listeners, a sealed command's TUN. Where:

- a request, in the `request` hook before capture's (`Egress.bodies`), when its body is read and
  before anything is forwarded (capture hands stream-looking requests to its relay there); an MCP
  `tools/call` in the body is judged by tool name and arguments;
- a request whose body is streamed through unread (over the size limit), in `requestheaders`:
  mitmproxy cannot answer a request it streams, so a refused one has its connection closed;
- a CONNECT, when the policy can decide by host and caller alone (`Policy.judge_host`), before the
  tunnel opens; otherwise the tunnel opens and each request in it is judged;
- in a sealed command's TUN (`flightlog run --sealed`): a DNS question by its name; a connection
  that is not HTTP (raw TCP, UDP other than DNS) is refused: nothing else can be carried and judged.

A refused call gets a clear answer at once (`egress.answers`: a 403 naming the rule, a JSON-RPC
error for a `tools/call`) and a `policy.refused` event names the rule and limit, in the call's
action beside what capture records of it (`recording.refusal_events`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from addons.credential_swap import RULE as CREDENTIAL
from addons.credential_swap import Swaps
from addons.egress_connections import EgressConnections, from_tun
from addons.flow_notes import EXCHANGE, JUDGED, LOCAL, MODEL, VERDICT, VERDICT_MESSAGE
from addons.verdicts import NO_POLICY, OWN, Verdict, Verdicts
from egress.answers import HEADER, http_body, jsonrpc_body
from egress.approvals import AskBook
from egress.budgets import BudgetBook
from egress.errors import PolicyFileError
from egress.judge import Gate
from egress.live import RETIRED_FILE, LivePolicy
from egress.mcp_calls import calls_in_message, unread_body
from egress.policy import DEFAULT
from egress.policy_file import FILE_NAME
from egress.rates import FILE as RATES_FILE
from egress.rates import RateBook
from egress.rules import ALLOWED, Call, Decision
from recording import identity as ident
from recording.action_ids import action_id
from recording.capture_setup import default_urls
from recording.records import Exchange, RefusalRecord
from storage.locations import flightlog_home

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from mitmproxy import http
    from mitmproxy.addonmanager import Loader

    from addons.capture import Capture

log = logging.getLogger("flightlog.egress")

Rpc = tuple[list[Any], bool]
"""The JSON-RPC ids of a body's calls (to answer each) and whether it was a batch."""


class Egress:
    """Holds the gate; its hooks run after capture's, but for `request` (see `bodies`)."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.gate: Gate | None = None
        self.tun_identity = ident.EMPTY
        self.verdicts = Verdicts()
        """The connection verdicts the choke point reads (`addons.verdicts`)."""
        self.bodies = EgressBodies(self)
        self.connections = EgressConnections(self)
        """Its hooks for what is not HTTP (a sealed command's DNS and raw connections)."""
        self.swaps = Swaps(capture.put)
        """Lent placeholders swapped for real secrets once a request is allowed (`lent`)."""
        self._watch: asyncio.Task[None] | None = None
        self.looks_itself = True
        """Looks at its policy file once a second itself; False in a worker, whose supervisor looks
        for every worker and nudges it (`look_at_files`), as for capture's files."""

    # -- options -----------------------------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "flightlog_policy",
            str,
            "",
            f"Egress policy file (default: FLIGHTLOG_HOME/{FILE_NAME}; none there: no policy).",
        )
        loader.add_option(
            "flightlog_tun_identity",
            str,
            "",
            "Identity (agent=A;session=S;task=T) filed on calls from a TUN listener (a sealed command).",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        opts = ctx.options
        if "flightlog_tun_identity" in updated:
            self.tun_identity = ident.parse_user(opts.flightlog_tun_identity)
        if self.swaps.book is None or updated & {"flightlog_secrets", "flightlog_secret_env"}:
            self.swaps.configure(opts)
        if self.gate is not None and not updated & {"flightlog_policy", "flightlog_ledger"}:
            return
        home = flightlog_home()
        path = Path(opts.flightlog_policy).expanduser() if opts.flightlog_policy else home / FILE_NAME
        try:
            live = LivePolicy(path, home, named=bool(opts.flightlog_policy))
        except PolicyFileError as e:
            raise exceptions.OptionsError(str(e)) from e
        ledger = opts.flightlog_ledger or default_urls()[0]
        self._close_books()
        self.gate = Gate(live, AskBook(home), BudgetBook(ledger), RateBook(home / RATES_FILE))

    async def running(self) -> None:
        if self.gate is not None:
            if self.looks_itself:
                self._watch = asyncio.create_task(self.gate.live.run())
            self.gate.live.announce()  # once for the proxy: a worker's is quiet (`egress.live`)

    def look_at_files(self) -> None:
        """A watched file changed (a worker's supervisor saw it): capture looks at its own (secrets,
        prices), then the policy is re-read if one of its files moved."""
        self.capture.look_at_files()
        if self.gate is not None:
            self.gate.live.look()

    def done(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._close_books()

    def _close_books(self) -> None:
        if self.gate is not None:
            self.gate.rates.close()
            if self.gate.budgets is not None:
                self.gate.budgets.close()

    def judge_upstream(self, call: Call) -> Decision:
        """The judge's word on a call the door makes itself (`door.upstream_judge`): the policy in
        force, as for every request through the proxy (no policy: allowed)."""
        gate = self.gate
        if gate is None or gate.idle:
            return ALLOWED
        return gate.judge(call)

    # -- tunnels ---------------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """Refuse a tunnel before it opens when its host (and caller) decide (`Policy.judge_host`);
        else it opens, and what it carries is judged (each request, or the raw stream)."""
        if flow.response is not None:  # answered here (flightlog.local): it goes nowhere
            return
        gate = self.gate
        if gate is None or gate.idle:
            self.grant(flow, NO_POLICY)
            return
        request = flow.request
        who = ident.from_proxy_authorization(request.headers.get("proxy-authorization"))
        call = Call("connect", request.host, request.port, "CONNECT", "", *_who(who))
        decision = gate.live.policy.judge_host(call)
        if decision is None or decision.action != "deny":
            self.grant(flow, decision.rule if decision is not None else "tunnel: its content is judged")
            return
        url = f"{request.host}:{request.port}"
        exchange = Exchange(action_id(flow.id, flow.timestamp_created), "out", "CONNECT", url, call.host, who)
        body = http_body(decision, call)
        flow.response = _response(403, body)
        self.record_refusal(exchange, decision, 403, None, body, attempt=True)

    # -- requests ----------------------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """A sealed command's request is filed under its identity (where the request names none
        itself); a request whose body capture streams through unread is judged now (no body to read)."""
        exchange = EXCHANGE.get(flow)
        if exchange is not None and self.tun_identity is not ident.EMPTY and from_tun(flow.client_conn):
            exchange = replace(exchange, identity=exchange.identity.over(self.tun_identity))
            EXCHANGE.put(flow, exchange)
        if not flow.request.stream or flow.response is not None:
            return None
        JUDGED.put(flow, True)
        exchange = self._exchange_to_judge(flow, exchange)
        if exchange is None:
            return None
        if self.gate is None or self.gate.idle:
            self._allow(flow, exchange, _call(flow, exchange), None, NO_POLICY)  # its headers go on now
            return None
        call = _call(flow, exchange)
        if self.gate.live.policy.reads_mcp:  # a body too large to read may hold a tools/call
            size = flow.request.headers.get("content-length")
            ctype = flow.request.headers.get("content-type", "")
            asked = unread_body(call, int(size) if size and size.isdigit() else None, ctype)
            return self._judge(flow, exchange, list(asked.calls), None)
        return self._judge(flow, exchange, [call], None)

    def judge_request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """The `request` hook (run before capture's): judge the call, or each `tools/call` in it.
        Every request that goes on is judged, recorded or not (`_exchange_to_judge`)."""
        if flow.response is not None or JUDGED.get(flow):
            return None
        exchange = self._exchange_to_judge(flow, EXCHANGE.get(flow))
        if exchange is None:
            return None
        gate = self.gate
        call = _call(flow, exchange)
        if gate is None or gate.idle:
            self._allow(flow, exchange, call, None, NO_POLICY)
            return None
        if not gate.live.policy.reads_mcp or not flow.request.raw_content:
            return self._judge(flow, exchange, [call], None)
        asked = calls_in_message(flow.request.raw_content, call)  # the one tools/call reader
        rpc = (list(asked.ids), asked.batch) if asked.tool_calls else None
        return self._judge(flow, exchange, list(asked.calls), rpc)

    def _judge(
        self, flow: http.HTTPFlow, exchange: Exchange, calls: list[Call], rpc: Rpc | None
    ) -> Awaitable[None] | None:
        """Judge `calls` in turn (the `tools/call`s of one body); the first refusal answers the request.
        A Host header claiming another host than the destination is judged too (`_claimed`)."""
        assert self.gate is not None
        claimed = self._claimed(flow, calls[0]) if calls else None
        if claimed is not None:
            self._refuse(flow, exchange, *claimed, None)
            return None
        decision = None
        for i, call in enumerate(calls):
            if call.model_call and self.gate.live.policy.budgets:
                MODEL.put(flow, exchange.flow_id)
            decision, waits = self.gate.first(call)
            if waits:
                return self._judge_later(flow, exchange, calls[i:], decision, rpc)
            if decision.refused:
                self._refuse(flow, exchange, call, decision, rpc)
                return None
        self._allow(
            flow,
            exchange,
            calls[-1] if calls else _call(flow, exchange),
            rpc,
            decision.rule if decision is not None else "no call in it",
        )
        return None

    def _allow(self, flow: http.HTTPFlow, exchange: Exchange, call: Call, rpc: Rpc | None, rule: str) -> None:
        """The judge allowed the request: lent placeholders become the real secrets where they may
        (`addons.credential_swap`), after the verdict so a refused request never carries one; a
        placeholder that may not refuses the request under `credential`, else it is granted."""
        misplaced = self.swaps.swap(flow, exchange)
        if misplaced is not None:
            refused = Decision("deny", CREDENTIAL, misplaced.limit, details={"secret": misplaced.name})
            self._refuse(flow, exchange, call, refused, rpc)
            return
        self.grant(flow, rule)

    async def _judge_later(
        self, flow: http.HTTPFlow, exchange: Exchange, calls: list[Call], decision: Decision, rpc: Rpc | None
    ) -> None:
        """The first of `calls` waits (a budget, an operator); the rest are judged after it."""
        assert self.gate is not None
        decision = await self.gate.finish(calls[0], decision)
        if decision.refused:
            self._refuse(flow, exchange, calls[0], decision, rpc)
            return
        if len(calls) == 1:
            self._allow(flow, exchange, calls[0], rpc, decision.rule)
            return
        rest = self._judge(flow, exchange, calls[1:], rpc)
        if rest is not None:
            await rest

    def _claimed(self, flow: http.HTTPFlow, call: Call) -> tuple[Call, Decision] | None:
        """A request whose Host header names another host than where it goes (domain fronting: an
        allowed address, a refused name behind it) is refused when a rule refuses the claimed host;
        the default alone does not (the destination was judged)."""
        assert self.gate is not None
        header = flow.request.host_header
        if not header:
            return None
        claim = _host_of(header)
        if not claim or claim == flow.request.host:
            return None
        claimed = replace(call, host=claim, tool=None, arguments=None)
        if claimed.host == call.host or claimed.host_error is not None:
            return None
        decision = self.gate.live.policy.judge(claimed)
        if not decision.refused or decision.rule == DEFAULT:
            return None
        limit = f"{decision.limit} (the Host header claims {claimed.host}; the request goes to {call.host})"
        return claimed, Decision(decision.action, decision.rule, limit, details=decision.details)

    def _exchange_to_judge(self, flow: http.HTTPFlow, exchange: Exchange | None) -> Exchange | None:
        """What a request is judged as: capture's exchange; for one capture does not record, an
        exchange of its own (a refusal is still filed), or None for flightlog's own traffic, which
        gets its verdict here: a `flightlog.local` route's WebSocket end, or a hop to one of this
        proxy's own listeners (which judges what reaches it)."""
        if exchange is not None:
            return exchange
        request = flow.request
        if LOCAL.get(flow) or self.capture.own_listener(request.host, request.port):
            self.grant(flow, OWN)
            return None
        flow_id = action_id(flow.id, flow.timestamp_created)
        who = ident.from_proxy_authorization(request.headers.get("proxy-authorization"))
        if self.tun_identity is not ident.EMPTY and from_tun(flow.client_conn):
            who = who.over(self.tun_identity)
        return Exchange(flow_id, "out", request.method, _real_url(request), request.host, who)

    def grant(self, flow: http.HTTPFlow, rule: str) -> None:
        """The judge allowed `flow` to its destination (as it now stands): the verdict the choke
        point checks, and a permit for the connection that carries it (`addons.verdicts`). Also
        the one place a step on every allowed request can be added."""
        request = flow.request
        VERDICT.put(flow, Verdict("allow", rule, request.host, request.port))
        self.verdicts.permit(flow.client_conn, request.host, request.port)

    def _refuse(
        self,
        flow: http.HTTPFlow,
        exchange: Exchange,
        call: Call,
        decision: Decision,
        rpc: Rpc | None,
    ) -> None:
        if flow.request.stream:  # streamed through unread: mitmproxy cannot answer it; close it
            decision = Decision(
                decision.action,
                decision.rule,
                decision.limit + " (its body, over the size limit, was being streamed: connection closed)",
                details=decision.details,
            )
            flow.kill()
            self.record_refusal(exchange, decision, None, call.tool, b"")
            return
        if rpc is not None and call.tool is not None:
            ids, batch = rpc
            body = jsonrpc_body(ids, decision, call, batch)
            status = 200 if ids else 202
            flow.response = _response(status, body if ids else b"")
        else:
            status, body = 403, http_body(decision, call)
            flow.response = _response(403, body)
        flow.response.headers[HEADER] = decision.rule
        self.record_refusal(exchange, decision, status, call.tool, body)

    def record_refusal(
        self,
        exchange: Exchange,
        decision: Decision,
        status: int | None,
        tool: str | None,
        body: bytes,
        attempt: bool = False,
    ) -> None:
        log.info(
            "flightlog: refused %s %s: rule %s: %s",
            exchange.method,
            exchange.url,
            decision.rule,
            decision.limit,
        )
        record = RefusalRecord(
            exchange, time.time(), decision.rule, decision.limit, status, tool, body, attempt
        )
        self.capture.put(record)

    # -- WebSocket messages ----------------------------------------------------------------------

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A message from the client is judged like an HTTP body: each `tools/call` in it by tool
        and arguments (the one reader, `calls_in_message`); a refused one is dropped, not sent."""
        ws = flow.websocket
        if ws is None or not ws.messages or not ws.messages[-1].from_client:
            return
        message = ws.messages[-1]
        gate = self.gate
        exchange = EXCHANGE.get(flow)
        if gate is not None and not gate.idle and gate.live.policy.reads_mcp and exchange is not None:
            asked = calls_in_message(message.content, _call(flow, exchange))
            for call in asked.calls if asked.tool_calls or asked.unreadable else ():
                decision = gate.judge(call)
                if decision.refused:
                    message.drop()
                    self.record_refusal(exchange, decision, None, call.tool, b"")
                    break
        VERDICT_MESSAGE.put(flow, message)

    # -- answers -----------------------------------------------------------------------------------

    def response(self, flow: http.HTTPFlow) -> None:
        self._answered(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        self._answered(flow)

    def _answered(self, flow: http.HTTPFlow) -> None:
        """A model call under a budget ended: its usage reaches the Ledger soon (`egress.budgets`)."""
        model_action = MODEL.pop(flow)
        if model_action is not None and self.gate is not None and self.gate.budgets is not None:
            self.gate.budgets.answered(model_action)


class EgressBodies:
    """`Egress`'s `request` hook, placed before capture's: judged with the body read, and before
    capture may hand a stream-looking request to its relay."""

    def __init__(self, egress: Egress) -> None:
        self.egress = egress

    def request(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        return self.egress.judge_request(flow)


def _who(who: ident.Identity) -> tuple[str | None, str | None, str | None]:
    return who.agent, who.session, who.task


def _call(flow: http.HTTPFlow, exchange: Exchange) -> Call:
    request = flow.request
    return Call(
        "http",
        request.host,
        request.port,
        request.method,
        request.path,
        *_who(exchange.identity),
    )


def _host_of(authority: str) -> str:
    """The host of a Host header's value (`name:port`, `[v6]:port`)."""
    text = authority.strip()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else ""
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _real_url(request: http.Request) -> str:
    """The URL of where the request goes (its destination, not its Host header)."""
    host = f"[{request.host}]" if ":" in request.host else request.host
    return f"{request.scheme}://{host}:{request.port}{request.path}"


def _response(status: int, body: bytes) -> http.Response:
    from mitmproxy import http

    headers = {"Content-Type": "application/json"} if body else {}
    return http.Response.make(status, body, headers)


def watched_files(opts: Any) -> list[Path]:
    """The files a change of which changes the policy: the policy file (named, or the default one,
    which may appear later) and the retired-hosts list (what a worker asks its supervisor to watch)."""
    home = flightlog_home()
    policy = Path(opts.flightlog_policy).expanduser() if opts.flightlog_policy else home / FILE_NAME
    return [policy, home / RETIRED_FILE]
