"""The egress policy: what an agent may send out, checked by the proxy before a request goes upstream.

A plain rules engine, tested without a proxy: `policy_file` reads the operator's TOML into a
`policy.Policy` (hosts in the one host language, `formats.hosts`, through `patterns`), `live` keeps
the one in force as its file changes (failing closed); `Policy.judge` answers allow, deny or ask for
one `rules.Call` (an HTTP request, a CONNECT, an MCP `tools/call` over HTTP, WebSocket or stdio, read
by `mcp_calls`, a DNS question, a raw connection, each with its protocol and port); `budgets` and
`rates` are the limits counted over time; `approvals` holds a request until an operator answers;
`judge` asks them all in order. The mitmproxy shell is `addons.egress_policy`; `flightlog
mcp-record` consults the same judge for stdio.

Not to be confused with `authority.lending`, the policy the tokens `flightlog run` lends are minted from
(`FLIGHTLOG_HOME/policy.toml`); this one lives in `FLIGHTLOG_HOME/egress.toml`.
"""
