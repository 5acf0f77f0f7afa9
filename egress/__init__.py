"""The egress policy: what an agent may send out, checked by the proxy before a request goes upstream.

A plain rules engine, tested without a proxy: `policy_file` reads the operator's TOML into an
`engine.Policy`; `Policy.decide` answers allow, deny or ask for one `rules.Call` (an HTTP request, a
CONNECT, an MCP `tools/call` over HTTP or stdio, a DNS question, a raw connection); `budgets` and
`rates` are the limits counted over time; `asks` holds a request until an operator answers. The
mitmproxy shell is `addons.egress_policy`; `flightlog mcp-record` consults the same engine for stdio.

Not to be confused with `authority.lending`, the policy the tokens `flightlog run` lends are minted from
(`FLIGHTLOG_HOME/policy.toml`); this one lives in `FLIGHTLOG_HOME/egress.toml`.
"""
