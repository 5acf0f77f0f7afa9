"""mitmproxy addons, the boundary. Imports storage and catalog.

The hook classes sit at this top level (`capture`, `sync_paths`, `local_routes`, `serve_replay`,
`master` which composes them, `mitmdump_entry` for plain mitmdump); everything they stand on lives in
four wings, each a package with its own contract in pyproject.toml:

- `recording`: records, the writer process, redaction, usage and prices, events;
- `wire`: HTTP heads, streaming, departures (a client leaving mid-answer) and the records of a flow;
- `readback`: recorded exchanges, replay, export and the Ledger's read routes;
- `door`: the dispatch door, its upstream calls, its HTTP and MCP routes.

Imports between wings flow door → readback → wire → recording; no wing imports a hook class.
"""
