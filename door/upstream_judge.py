"""The door's upstream calls before the egress judge: the same function that judges the proxy's.

The door calls upstreams itself (`door.upstream`, httpx straight out, never through the proxy), so
the proxy's choke point never sees those calls. Instead the dispatcher asks the egress judge the
proxy runs (`Dispatcher.egress`: the policy in force, `egress.policy.Policy.judge`) about every
upstream a call would reach, after its arguments and secrets are bound and before anything is
sent or a use is spent: an HTTP contract by its URL and method, an MCP-over-HTTP contract by its
server's URL and the tool and arguments of its `tools/call`. Calls to flightlog's own routes are
judged by the gate that guards them; a command run here has no host to judge. An `ask` is refused:
the door answers at once and does not wait for an operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from door.checks import Refused
from door.routes import HOST
from egress.rules import Call, Decision
from recording.identity import Identity

Judge = Callable[[Call], Decision]
LIMIT = "egress"


def upstream_calls(bound: Any, who: Identity) -> list[Call]:
    """The calls the bound contract (one form or a list of them) would make, as the judge sees them."""
    parts = bound if isinstance(bound, list) else [bound]
    calls = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        server = part.get("server")
        url = part.get("url") if isinstance(part.get("url"), str) else None
        if url is None and isinstance(server, Mapping) and isinstance(server.get("url"), str):
            url = server["url"]
        if url is None:
            continue
        split = urlsplit(url)
        host = split.hostname or ""
        if host == HOST:
            continue
        port = split.port or (443 if split.scheme == "https" else 80)
        path = (split.path or "/") + (f"?{split.query}" if split.query else "")
        method = str(part.get("method", "GET")).upper()
        tool = part.get("tool") if method == "MCP" and isinstance(part.get("tool"), str) else None
        calls.append(
            Call(
                "http",
                host,
                port,
                "POST" if method == "MCP" else method,
                path,
                who.agent,
                who.session,
                who.task,
                tool=tool,
                arguments=part.get("arguments") if tool is not None else None,
            )
        )
    return calls


def judge_upstreams(judge: Judge | None, bound: Any, who: Identity) -> None:
    """Raise `Refused` (limit `egress`) for the first upstream the judge does not allow."""
    if judge is None:
        return
    for call in upstream_calls(bound, who):
        decision = judge(call)
        if decision.action != "allow":
            why = " (the door does not wait for an operator)" if decision.action == "ask" else ""
            raise Refused(
                LIMIT,
                f"refused by flightlog's egress policy rule {decision.rule}: {decision.limit}{why}",
                status=403,
                rule=decision.rule,
                target=call.target,
            )
