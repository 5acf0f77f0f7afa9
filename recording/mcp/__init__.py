"""MCP recorded: over HTTP through the proxy (`http_messages`, `live`) and over stdio (`stdio`, the
`flightlog mcp-record` relay, `stdio_events` its lines as events, `stdio_judge` its egress policy).
"""
