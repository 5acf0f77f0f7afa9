"""The Directory: documents, derived index, contracts, resolver, agent API, MCP. Imports storage only."""
