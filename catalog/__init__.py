"""The Directory: documents, derived index, contracts, resolver, agent API, MCP. Imports storage only.

Entry points: `catalog.directory.open_directory` (the Python API, documented there),
`catalog.agent_api.AgentApi` (the seed 002 verbs as text), `catalog.http_api.handle` (the
`/api/directory/...` routes as a pure function), `catalog.mcp_server.serve` (MCP over stdio).
"""
