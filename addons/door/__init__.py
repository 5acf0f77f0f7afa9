"""The dispatch door: one canonical call in, one upstream call made and recorded.

`dispatch` is the door as plain logic (`Dispatcher`), `dispatch_record` the Ledger events it writes
for its own exchanges, `upstream` the upstream calls it makes with their exact bytes, `http_face` its
HTTP routes under `flightlog.local`, `mcp_route` the agent API over MCP streamable HTTP, and
`local_transport` flightlog.local without the network (an httpx transport over the route table).
The door may use recording (redaction, identity, secrets) and readback (the Ledger's read routes);
nothing below it imports the door.
"""
