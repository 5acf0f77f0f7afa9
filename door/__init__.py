"""The dispatch door: one canonical call in, one upstream call made and recorded.

`dispatch` is the door as plain logic (`Dispatcher`), `dispatch_record` the Ledger events it writes for its
own exchanges, `upstream` the upstream calls it makes with their exact bytes, `http_face` its HTTP routes
under `flightlog.local`, `mcp_route` the agent API over MCP streamable HTTP, and `local_transport`
flightlog.local without the network (an httpx transport over the route table). Who may: `callers` the checks
every flightlog.local request passes first (browser-shaped requests, the bearer it shows), `gatekeeper` the
token gate (`authority.gate`) asked for every route, `checks` the door's refusals as plain functions,
`proxy_settings` the proxy's one settings value, `assembly` the one way a `Dispatcher` and the proxy's `Door`
are built, `live_config` refused hosts and secrets re-read when they change. It never touches mitmproxy (the
proxy's shell is `addons.local_routes`); it may use recording (redaction, identity, secrets), authority and
readback (the Ledger's read routes); nothing below it imports the door.
"""
