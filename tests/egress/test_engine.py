"""The rules engine alone (no proxy): what each condition matches, first match, the default,
retired hosts on every path, what a connection can be told before its requests, and the host index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from egress.policy import Policy
from egress.policy_file import parse_policy
from egress.rules import Call


def policy(*rules: dict[str, Any], default: str = "allow", home: Path | None = None) -> Policy:
    return parse_policy({"default": default, "rule": list(rules)}, "test.toml", home)


def http(host: str, method: str = "GET", path: str = "/", port: int = 443, **who: str) -> Call:
    return Call("http", host, port, method, path, who.get("agent"), who.get("session"), who.get("task"))


def tool(name: str, arguments: Any = None, host: str = "mcp.example", **who: str) -> Call:
    base = Call("http", host, 443, "POST", "/mcp", who.get("agent"), who.get("session"), who.get("task"))
    return Call(base.kind, base.host, base.port, base.method, base.path, base.agent, base.session,
                base.task, name, arguments)  # fmt: skip


# (rule scope, a call it names, a call it does not) for every condition and host pattern kind
MATCHES = [
    ({"hosts": "api.example.com"}, http("api.example.com"), http("x.api.example.com")),
    ({"hosts": "*.example.com"}, http("a.b.example.com"), http("example.com")),
    ({"hosts": ".example.com"}, http("example.com"), http("notexample.com")),
    ({"hosts": "api-*.example.com"}, http("api-eu.example.com"), http("api.example.com")),
    ({"hosts": "*"}, http("anything.test"), Call("mcp", "", None, "MCP", "", tool="t")),
    ({"hosts": "10.0.0.0/8"}, http("10.2.3.4"), http("11.0.0.1")),
    ({"hosts": "fd00::/8"}, http("fd12::1"), http("fe80::1")),
    ({"hosts": "192.0.2.7"}, http("192.0.2.7"), http("192.0.2.8")),
    ({"hosts": "api.example.com:8443"}, http("api.example.com", port=8443), http("api.example.com")),
    ({"hosts": "[::1]:8443"}, http("::1", port=8443), http("::1", port=443)),
    ({"methods": ["post"]}, http("h", "POST"), http("h", "GET")),
    ({"paths": "/v1/*"}, http("h", path="/v1/chat?x=1"), http("h", path="/v2/chat")),
    ({"paths": "/exact"}, http("h", path="/exact"), http("h", path="/exact/more")),
    ({"paths": "*/admin/*"}, http("h", path="/a/admin/b"), http("h", path="/a/b")),
    ({"agents": "alpha"}, http("h", agent="alpha"), http("h")),
    ({"agents": "*"}, http("h"), Call("mcp", "", None, "MCP", "", agent="a", tool="t")),
    ({"sessions": ["s1", "s2"]}, http("h", session="s2"), http("h", session="s3")),
    ({"tasks": "t-*"}, http("h", task="t-9"), http("h", task="u-9")),
    ({"tools": "fs_*"}, tool("fs_read"), http("h", "POST")),
    ({"tools": "fs_*", "args": {"path": "/etc/*"}}, tool("fs_read", {"path": "/etc/x"}), tool("fs_read", {})),
    (
        {"tools": "*", "args": {"opts.force": "true"}},
        tool("rm", {"opts": {"force": True}}),
        tool("rm", {"opts": 1}),
    ),
    ({"args": {"n": ["5", "6"]}}, tool("any", {"n": 6}), tool("any", {"n": 7})),
    ({"args": {"path": "/etc/*"}}, tool("fs", {"PATH": "/etc/x"}), tool("fs", {"Path": "/ok"})),
    ({"protocol": "tcp"}, Call("tcp", "h", 22), http("h")),
    ({"protocol": ["udp", "quic"]}, Call("quic", "h", 443), Call("tcp", "h", 443)),
    ({"protocol": "http"}, http("h"), Call("mcp", "", None, "MCP", "", tool="t")),
    ({"protocol": "stdio", "tools": "t"}, Call("mcp", "", None, "MCP", "", tool="t"), tool("t")),
    ({"port": 22}, Call("tcp", "h", 22), Call("tcp", "h", 23)),
    ({"port": ["8000-8999", 443]}, http("h", port=8080), http("h", port=9000)),
    ({"hosts": "h.example:443"}, Call("dns", "H.Example."), Call("dns", "other.example")),
    ({"port": 53, "hosts": "x.example"}, Call("dns", "x.example"), Call("tcp", "x.example", 80)),
    ({"hosts": "127.0.0.0/8"}, http("2130706433"), http("128.0.0.1")),
    ({"hosts": "bücher.example"}, http("xn--bcher-kva.example"), http("buecher.example")),
]


@pytest.mark.parametrize(("scope", "named", "other"), MATCHES, ids=[str(m[0])[:40] for m in MATCHES])
def test_each_condition_names_its_calls(scope: dict[str, Any], named: Call, other: Call) -> None:
    """Each condition (and each kind of host pattern) holds for the calls it names and not others.
    `hosts = "*"` names every call that has a host, not a stdio tool call (which has none);
    `agents = "*"` names callers that gave no name too."""
    if scope.get("agents") == "*":
        scope = {**scope, "hosts": "h"}  # every caller matches "*": the other call differs by host
    rules = policy({"action": "deny", "name": "r", **scope})
    assert rules.judge(named).rule == "r"
    assert rules.judge(other).action == "allow"


def test_first_match_wins_in_file_order() -> None:
    """The first rule whose scope holds decides; a later, broader or narrower one is never asked.
    So an exception goes above the rule it excepts, as in a firewall's list."""
    rules = policy(
        {"name": "allow-docs", "action": "allow", "hosts": "api.example.com", "paths": "/docs/*"},
        {"name": "deny-api", "action": "deny", "hosts": "api.example.com"},
        {"name": "allow-all", "action": "allow"},
    )
    assert rules.judge(http("api.example.com", path="/docs/x")).rule == "allow-docs"
    assert rules.judge(http("api.example.com", path="/admin")).rule == "deny-api"
    assert rules.judge(http("other.example")).rule == "allow-all"
    reversed_rules = policy(
        {"name": "deny-api", "action": "deny", "hosts": "api.example.com"},
        {"name": "allow-docs", "action": "allow", "hosts": "api.example.com", "paths": "/docs/*"},
    )
    assert reversed_rules.judge(http("api.example.com", path="/docs/x")).rule == "deny-api"


def test_deny_by_default_names_the_default() -> None:
    """With `default = "deny"` a call no rule allows is refused by the rule named `default`."""
    rules = policy({"action": "allow", "hosts": "ok.example"}, default="deny")
    assert rules.judge(http("ok.example")).action == "allow"
    refused = rules.judge(http("other.example"))
    assert (refused.action, refused.rule) == ("deny", "default")
    assert "no rule allows it" in refused.limit


def test_retired_hosts_are_refused_on_every_path(tmp_path: Path) -> None:
    """A host in FLIGHTLOG_HOME/refused_hosts.txt is refused before any rule (even an allow-all):
    the host, its subdomains, a relay URL carrying it in a query, an MCP call's arguments, a
    CONNECT and a DNS question; a name that merely ends the same way is not."""
    (tmp_path / "refused_hosts.txt").write_text("old.example\n")
    rules = policy({"action": "allow"}, home=tmp_path)
    refused = [
        http("old.example"),
        http("API.old.example".lower()),
        http("relay.test", path="/go?u=https%3A%2F%2Fold.example%2Fx"),
        tool("fetch", {"url": "https://old.example/x"}, host="mcp.test"),
        Call("connect", "old.example", 443, "CONNECT"),
        Call("dns", "www.old.example", None, "DNS"),
        Call("mcp", "", None, "MCP", "", tool="fetch", arguments={"u": "http://old.example"}),
    ]
    for call in refused:
        decision = rules.judge(call)
        assert (decision.action, decision.rule) == ("deny", "retired-hosts"), call
    connect = rules.judge_host(Call("connect", "old.example", 443, "CONNECT"))
    assert connect is not None and connect.rule == "retired-hosts"
    assert rules.judge(http("notold.example")).action == "allow"


def test_a_connection_is_decided_only_when_its_host_decides() -> None:
    """Before any request of a tunnel (or a DNS question) is seen, the policy answers only when the
    first rule for the host needs nothing else; a rule about paths, methods or tools leaves each
    request to be judged (None); deny rules about some requests never make a host allowed."""
    rules = policy(
        {"name": "no-admin", "action": "deny", "hosts": "api.example", "paths": "/admin*"},
        {"name": "api", "action": "allow", "hosts": "api.example"},
        {"name": "gone", "action": "deny", "hosts": "gone.example"},
        {"name": "tools", "action": "allow", "hosts": "mcp.example", "tools": "read_*"},
        default="deny",
    )
    connect = lambda host: Call("connect", host, 443, "CONNECT")  # noqa: E731
    assert rules.judge_host(connect("api.example")) is None  # /admin refused, the rest allowed
    assert rules.judge_host(connect("gone.example")).rule == "gone"  # type: ignore[union-attr]
    assert rules.judge_host(connect("mcp.example")) is None  # some tools/calls allowed
    nothing = rules.judge_host(connect("elsewhere.example"))
    assert nothing is not None and nothing.rule == "default"
    only_denies = policy({"action": "deny", "hosts": "x.example", "paths": "/a"}, default="deny")
    assert only_denies.judge_host(connect("x.example")).action == "deny"  # type: ignore[union-attr]


HOSTS = ["a.example", "b.a.example", "c.example", "10.1.2.3", "x.test", "api-1.example", "example"]
PATTERNS = ["a.example", "*.a.example", ".example", "*", "10.0.0.0/8", "api-*.example", "c.example:443"]


@given(
    st.lists(
        st.tuples(st.sampled_from(PATTERNS), st.sampled_from(["allow", "deny", "ask"]), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(HOSTS),
    st.sampled_from([443, 80]),
)
def test_the_host_index_never_changes_a_decision(rules: list[Any], host: str, port: int) -> None:
    """Whatever the rules, judging through the host index gives the decision a plain top-down
    scan of every rule gives: the index only skips rules that cannot match."""
    tables = [
        {"action": action, "hosts": pattern, **({"methods": ["GET"]} if methods else {})}
        for pattern, action, methods in rules
    ]
    built = policy(*tables, default="deny")
    call = http(host, port=port)
    expected = next((r for r in built.rules if r.scope.matches(call)), None)
    decision = built.judge(call)
    assert decision.rule == (expected.name if expected else "default")


def test_a_tunnel_is_left_to_what_it_carries_when_a_rule_names_a_protocol() -> None:
    """A CONNECT does not say what it will carry: a rule naming a protocol neither opens nor closes
    it (the connection or requests inside are judged), while a host alone still decides."""
    ssh = policy({"name": "ssh", "action": "allow", "protocol": "tcp", "hosts": "github.com", "port": 22},
                 default="deny")  # fmt: skip
    assert ssh.judge_host(Call("connect", "github.com", 22, "CONNECT", "")) is None
    assert ssh.judge_host(Call("connect", "gitlab.com", 22, "CONNECT", "")).rule == "default"  # type: ignore[union-attr]
    assert ssh.judge(Call("tcp", "github.com", 22)).rule == "ssh"
    no_raw = policy({"name": "no-raw", "action": "deny", "protocol": "tcp"})
    assert no_raw.judge_host(Call("connect", "any.example", 443, "CONNECT", "")) is None
    assert no_raw.judge(Call("tcp", "any.example", 443)).rule == "no-raw"


def test_a_host_that_is_neither_name_nor_address_is_refused_first() -> None:
    """What cannot be read as a host cannot be compared with any rule: refused (rule `host`), by a
    connection's judgement too, whatever the rules allow."""
    rules = policy({"action": "allow", "hosts": "*"})
    for raw in ("exa mple.com", "999.1.1.1", "a..b"):
        call = Call("http", raw, 80, "GET", "/")
        assert call.host_error is not None and rules.judge(call).rule == "host"
        assert rules.judge_host(Call("connect", raw, 443, "CONNECT", "")).rule == "host"  # type: ignore[union-attr]
