"""The policy as read, and its one question: what to do with this call.

Order of judgement, the same on every path (forward, CONNECT, reverse and model listeners, a sealed
command's TUN, stdio MCP):

1. **Retired hosts** (`FLIGHTLOG_HOME/refused_hosts.txt`, the list the Directory's contracts are
   refused by) refuse first, whatever a rule says: the host itself or a subdomain, a retired host in
   the URL (a relay's query parameter), or in a `tools/call`'s arguments. Rule name `retired-hosts`.
2. **Rules, first match.** The first rule in file order whose scope holds decides (`allow`, `deny`,
   `ask`), as firewalls and proxy access lists do: an operator reads the file top down and writes the
   narrow exceptions above the broad rules. (Most-specific-wins was weighed and not taken: which of
   two overlapping globs is "more specific" is not always clear, and a reader could not tell the
   outcome from the order of the file.)
3. **Default**: `default = "allow"` (the default) or `"deny"`, rule name `default`.

Before all three, what cannot be judged is refused: a host that is neither a name nor an address
(rule `host`), and, when a rule looks at tools, a body or message that may hold a `tools/call` but
cannot be read for certain (rule `unreadable`, `egress.mcp_calls`).

Limits (budgets, rates) are asked by the gate after a call is allowed (`egress.judge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from egress.host_index import HostIndex
from egress.limits import Budget, Rate
from egress.rules import ALLOWED, Action, Call, Decision, Rule

if TYPE_CHECKING:
    from catalog.retired_hosts import RefusedHosts

RETIRED: Final = "retired-hosts"
DEFAULT: Final = "default"
HOST: Final = "host"
UNREADABLE: Final = "unreadable"
DEFAULT_ASK_TIMEOUT: Final = 120.0
NARROWED_MAX: Final = 4096


@dataclass(frozen=True)
class Policy:
    """An egress policy: rules in order, what no rule matches gets, limits, and retired hosts."""

    rules: tuple[Rule, ...] = ()
    default: Action = "allow"
    budgets: tuple[Budget, ...] = ()
    rates: tuple[Rate, ...] = ()
    ask_timeout: float = DEFAULT_ASK_TIMEOUT
    retired: RefusedHosts | None = None
    source: str = "no policy file"
    index: HostIndex = field(init=False, repr=False, compare=False)
    empty: bool = field(init=False, compare=False)
    """Nothing to judge: every call is allowed without looking at it."""
    reads_mcp: bool = field(init=False, compare=False)
    """Whether any rule, budget or rate (or the retired hosts) needs a `tools/call`'s name and
    arguments: then a call that cannot be read is refused."""
    _narrowed: dict[tuple[object, ...], tuple[int, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    """The rules that can match calls of one host, port, method and caller, worked out once."""

    def __post_init__(self) -> None:
        # worked out once: the proxy asks these of every request
        object.__setattr__(self, "index", HostIndex(self.rules))
        nothing = not self.rules and self.default == "allow" and not self.budgets and not self.rates
        object.__setattr__(self, "empty", nothing and not self.retired)
        scopes = (
            [r.scope for r in self.rules] + [b.scope for b in self.budgets] + [r.scope for r in self.rates]
        )
        tools = any(s.tools is not None or s.args for s in scopes)
        object.__setattr__(self, "reads_mcp", bool(self.retired) or tools)

    def judge(self, call: Call) -> Decision:
        """Retired hosts, then the first rule that matches, then the default (module docstring)."""
        if call.host_error is not None or call.unreadable is not None:
            refused = self._unjudgeable(call)
            if refused is not None:
                return refused
        if self.retired:
            refused = self._retired(call)
            if refused is not None:
                return refused
        rules = self.rules
        for i in self._candidates(call):
            rule = rules[i]
            if rule.scope.matches_content(call):
                return self._decided(rule)
        return self._fallback()

    def _candidates(self, call: Call) -> tuple[int, ...]:
        """The rules whose host, method and caller conditions hold for `call`, in order: only their
        path, tool and argument conditions are left to check (most rules drop out here, once)."""
        key = (
            call.kind,
            call.protocol,
            call.host,
            call.port,
            call.method,
            call.agent,
            call.session,
            call.task,
        )
        found = self._narrowed.get(key)
        if found is None:
            rules = self.rules
            narrowed = self.index.candidates(call.host)
            found = tuple(i for i in narrowed if rules[i].scope.matches_where_and_who(call))
            if len(self._narrowed) >= NARROWED_MAX:
                self._narrowed.clear()
            self._narrowed[key] = found
        return found

    def judge_host(self, call: Call) -> Decision | None:
        """For a connection before any request in it is seen (a CONNECT, a TUN connection, a DNS
        question): the decision when the first rule that could apply needs nothing but the host and
        caller to decide, else None (each request inside is judged on its own). For a tunnel asked
        for (`connect`), what it will carry is not known yet: a rule naming a protocol is left to
        the connection or requests inside, as a rule naming paths is."""
        if call.host_error is not None:
            return self._unjudgeable(call)
        if self.retired:
            refused = self._retired(call)
            if refused is not None:
                return refused
        rules = self.rules
        some_denied = False  # a rule before refuses some requests to this host, not all
        for i in self.index.candidates(call.host):
            rule = rules[i]
            scope = rule.scope
            if not scope.matches_caller(call):
                continue
            tunnel = call.kind == "connect"
            if not scope.matches_where(call, protocol_known=not tunnel):
                continue
            if scope.about_requests or (tunnel and scope.protocols is not None):
                if rule.action != "deny":
                    return None  # some request may be allowed (or asked about): judge each
                some_denied = True
                continue
            if some_denied and rule.action != "deny":
                return None
            return self._decided(rule)
        if some_denied and self.default != "deny":
            return None
        return self._fallback()

    def _unjudgeable(self, call: Call) -> Decision | None:
        """A refusal of what cannot be judged (module docstring), or None: `unreadable` is judged
        as the request it came in when no rule looks at tools."""
        if call.host_error is not None:
            return Decision("deny", HOST, f"the host cannot be judged: {call.host_error}")
        if call.unreadable is not None and self.reads_mcp:
            return Decision("deny", UNREADABLE, f"a tool call the policy cannot read: {call.unreadable}")
        return None

    def _decided(self, rule: Rule) -> Decision:
        if rule.action == "allow":
            return Decision("allow", rule.name, rule.limit())
        return Decision(rule.action, rule.name, rule.limit(), ask_timeout=self.ask_timeout)

    def _fallback(self) -> Decision:
        if self.default == "allow":
            return ALLOWED
        return Decision(self.default, DEFAULT, f"no rule allows it (default = {self.default!r})")

    def _retired(self, call: Call) -> Decision | None:
        from catalog.errors import RefusedHost

        assert self.retired is not None
        host = call.host
        if host and (retired := self.retired.covering(host)) is not None:
            return Decision("deny", RETIRED, f"host {host} is retired ({retired} in refused_hosts.txt)")
        try:
            if call.path and call.kind == "http":
                self.retired.check(call.path, "the URL")
            if call.arguments is not None:
                self.retired.check(call.arguments, f"{call.tool} arguments")
        except RefusedHost as e:
            return Decision("deny", RETIRED, str(e))
        return None

    def budgets_for(self, call: Call) -> Sequence[Budget]:
        return [b for b in self.budgets if b.applies(call)] if self.budgets else ()

    def rates_for(self, call: Call) -> Sequence[Rate]:
        return [r for r in self.rates if r.scope.matches(call)] if self.rates else ()
