"""What the policy judges (`Call`), the conditions a rule or limit names (`Scope`), rules, decisions.

A `Scope` is the part every rule, budget and rate limit shares: which calls it is about. Each
condition it leaves out matches anything; the ones it names must all hold:

- `hosts` (the one host language, `formats.hosts`), `protocols`, `ports`, `methods`, `paths` (path
  and query, a glob): where the call goes and how. A scope naming methods or paths matches HTTP
  requests only; a DNS question has no port, so a port condition (in `ports` or a host pattern's
  `:PORT`) holds for it: it is asked on the way to every port of its name;
- `agents`, `sessions`, `tasks` (globs): who sends it; a call without an agent is matched as the
  empty name, so `"*"` names every caller and `"alpha"` never one that did not say who it is;
- `tools` (globs) and `args` (argument name, dotted for nested ones, to a glob or a list of them):
  an MCP `tools/call` and its arguments. A scope naming them matches `tools/call`s only. An argument
  that is not a string is compared as its compact JSON text (`5`, `true`, `["a"]`); one that is
  absent fails the condition.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from egress.patterns import HostPattern, Matcher
from formats import model_apis
from formats.hosts import HostError, normalize_host

Action = Literal["allow", "deny", "ask"]
ACTIONS: Final = ("allow", "deny", "ask")
Kind = Literal["http", "connect", "mcp", "dns", "tcp", "udp", "quic"]
PROTOCOLS: Final = ("http", "tcp", "udp", "dns", "quic", "stdio")
"""What a rule's `protocol` may name: HTTP of any version (also inside TLS, a tunnel or QUIC),
a raw TCP stream, UDP datagrams, a DNS question, QUIC that is not HTTP/3, a stdio MCP line."""
_PROTOCOL_OF_KIND: Final = {"http": "http", "connect": "http", "mcp": "stdio"}


@dataclass(frozen=True, slots=True)
class Call:
    """One thing an agent sends, as the policy sees it.

    `kind` says what it is: an HTTP request (`http`, also when it carries MCP), a tunnel asked for
    (`connect`), a stdio MCP message (`mcp`), a DNS question (`dns`), or a connection that is not
    HTTP (`tcp`, `udp`, `quic`). `protocol` is what a rule's `protocol` compares (`PROTOCOLS`); left
    empty it follows the kind (`http` for `http` and `connect`, `stdio` for `mcp`, else the kind).

    `host` is made canonical here (`formats.hosts.normalize_host`: every spelling of an address one
    address, names in IDNA A-labels), so no call can reach the rules in a spelling they would not
    compare; a host that is neither name nor address keeps its text and `host_error` says why (the
    policy refuses it). Empty over stdio. `unreadable` says why a body or message that may carry a
    `tools/call` could not be read (too large, not JSON, a duplicate key): with a rule on tools, the
    policy refuses it rather than judge it as something it may not be.
    """

    kind: Kind
    host: str
    port: int | None = None
    method: str = ""
    path: str = ""
    agent: str | None = None
    session: str | None = None
    task: str | None = None
    tool: str | None = None
    arguments: Any = None
    protocol: str = ""
    unreadable: str | None = None
    host_error: str | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.protocol:
            object.__setattr__(self, "protocol", _PROTOCOL_OF_KIND.get(self.kind, self.kind))
        if self.host:
            try:
                object.__setattr__(self, "host", normalize_host(self.host))
            except HostError as e:
                object.__setattr__(self, "host_error", str(e))

    @property
    def model_call(self) -> bool:
        """Whether this is a call to a model API (what budgets count and limit): the one list of
        them, `formats.model_apis`, the same the Ledger reads usage by."""
        if self.kind != "http" or self.method != "POST":
            return False
        return model_apis.api_of_path(self.path) is not None

    @property
    def target(self) -> str:
        """The call in a few words, for refusal texts: `POST api.example.com/v1/x`, `tools/call fs.read`."""
        if self.tool is not None:
            return f"tools/call {self.tool}" + (f" on {self.host}" if self.host else "")
        where = self.host + (f":{self.port}" if self.port and self.kind != "http" else "")
        return f"{self.method} {where}{self.path if self.kind == 'http' else ''}".strip()


@dataclass(frozen=True, slots=True)
class Scope:
    """The calls a rule or limit is about (see the module's docstring). Built by `policy_file`."""

    hosts: tuple[HostPattern, ...] = ()
    protocols: frozenset[str] | None = None
    ports: tuple[tuple[int, int], ...] = ()
    """Port ranges, each (first, last) inclusive; empty: any port."""
    methods: frozenset[str] | None = None
    paths: Matcher | None = None
    agents: Matcher | None = None
    sessions: Matcher | None = None
    tasks: Matcher | None = None
    tools: Matcher | None = None
    args: tuple[tuple[tuple[str, ...], Matcher], ...] = ()
    text: str = ""
    """The conditions as written, for refusal texts (`hosts=*.example.com methods=POST`)."""

    @property
    def about_requests(self) -> bool:
        """Whether it looks inside a request (method, path, tool): a connection alone cannot decide it."""
        return self.methods is not None or self.paths is not None or self.tools is not None or bool(self.args)

    def matches(self, call: Call) -> bool:
        """Whether `call` is one this scope names (host first: most rules differ there)."""
        return self.matches_where(call) and self.matches_beyond_where(call)

    def matches_beyond_where(self, call: Call) -> bool:
        """Every condition but the host, protocol and port."""
        if self.methods is not None and call.method not in self.methods:
            return False
        return self.matches_caller(call) and self.matches_content(call)

    def matches_where(self, call: Call, protocol_known: bool = True) -> bool:
        """The host, protocol and port conditions (module docstring: a DNS question has no port);
        without `protocol_known` (a tunnel not yet opened) the protocol condition is left out."""
        if protocol_known and self.protocols is not None and call.protocol not in self.protocols:
            return False
        if call.kind == "dns":
            return not self.hosts or any(h.matches_host(call.host) for h in self.hosts)
        if self.ports and (call.port is None or not any(lo <= call.port <= hi for lo, hi in self.ports)):
            return False
        return not self.hosts or any(h.matches(call.host, call.port) for h in self.hosts)

    def matches_where_and_who(self, call: Call) -> bool:
        """The conditions a call's host, protocol, port, method and caller decide (the same for
        every call of theirs: what the engine works out once per such combination)."""
        if not self.matches_where(call):
            return False
        if self.methods is not None and call.method not in self.methods:
            return False
        return self.matches_caller(call)

    def matches_content(self, call: Call) -> bool:
        """The conditions on what this one call carries: its path, its tool and the tool's arguments."""
        if self.paths is not None and (call.kind != "http" or not self.paths(call.path)):
            return False
        if self.tools is not None or self.args:
            if call.tool is None or (self.tools is not None and not self.tools(call.tool)):
                return False
            for keys, matcher in self.args:
                value = _argument(call.arguments, keys)
                if value is _ABSENT or not matcher(value if isinstance(value, str) else _json(value)):
                    return False
        return True

    def matches_caller(self, call: Call) -> bool:
        """The agent, session and task conditions alone."""
        return (
            (self.agents is None or self.agents(call.agent or ""))
            and (self.sessions is None or self.sessions(call.session or ""))
            and (self.tasks is None or self.tasks(call.task or ""))
        )


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: a scope and what to do with the calls in it. `position` is its place in the file."""

    name: str
    action: Action
    scope: Scope
    position: int

    def limit(self) -> str:
        """What it says, in the words a refusal names it by."""
        return f"{self.action} {self.scope.text or 'every call'}"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policy says of one call: `allow`, `deny` or `ask`, the rule that said it and why.

    `rule` is a rule's name (or a budget's, a rate's, or one of the built-in names `default`,
    `retired-hosts`, `host`, `unreadable`, `protocol`); `limit` is the condition that decided, in words."""

    action: Action
    rule: str
    limit: str
    ask_timeout: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        return self.action == "deny"


ALLOWED: Final = Decision("allow", "default", "no rule refuses it")

_ABSENT: Final = object()


def _argument(arguments: Any, keys: tuple[str, ...]) -> Any:
    """The argument at `keys`; a key given in another letter case counts (servers that ignore case,
    as Go's encoding/json does, read it as this one; two spellings at once are unreadable before)."""
    value = arguments
    for key in keys:
        if not isinstance(value, dict):
            return _ABSENT
        if key not in value:
            folded = [k for k in value if isinstance(k, str) and k.casefold() == key.casefold()]
            if len(folded) != 1:
                return _ABSENT
            key = folded[0]
        value = value[key]
    return value


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
