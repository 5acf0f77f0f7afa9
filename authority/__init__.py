"""Token authority: who may use flightlog's own doors, judged by one gate.

`tokens` are link-sized credentials that carry their own limits (`caveats`, in the macaroon style);
`gate` is the one check every door asks (may this token do VERB on these rows through DOOR, now?);
`targets` reads which rows of the Directory a request acts on; `lending` mints the tokens
`flightlog run` and `flightlog mcp` lend, from the operator's `policy.toml`. Authority judges the
Directory's rows, so it sits above `catalog` and below the doors that ask it.
"""
