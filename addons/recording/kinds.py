"""Every event kind the capture addons write, in one place so readers and writers agree.

- `http.request`: what a client sent through the proxy (head + body).
- `http.response`: the answer to it, or the upstream failure (refused, TLS, timeout, reset) in `error`.
- `websocket.client` / `websocket.server`: one message of an upgraded connection, from that side
  (the 101 answer is the exchange's `http.response`; all share its `action_id`).
- `websocket.close`: how the connection ended: the close code in `status`, the reason as payload.
- `capture.overflow`: the writer's queue was full and items were dropped; the count is in `error`.
- `mcp.<method>` / `mcp.<method>.result` (`mcp.result` when the call was not seen): one MCP JSON-RPC
  message, from a stdio session (`flightlog mcp-record`, `addons.recording.mcp_stdio_events`) or from
  an exchange through the proxy (`addons.recording.mcp_messages`); `mcp.invalid`: a stdio line that is
  not JSON-RPC; `mcp.start` / `mcp.exit`: a stdio session's start and end (the exit code in `status`).
  Rules in `addons.recording.mcp_jsonrpc`.
"""

from __future__ import annotations

from typing import Final

HTTP_REQUEST: Final = "http.request"
HTTP_RESPONSE: Final = "http.response"
CAPTURE_OVERFLOW: Final = "capture.overflow"
WEBSOCKET_KINDS: Final = {
    "client": "websocket.client",
    "server": "websocket.server",
    "close": "websocket.close",
}

REQUEST_ROLE: Final = "request"
RESPONSE_ROLE: Final = "response"


def event_id(flow_id: str, role: str) -> str:
    """A stable event id from mitmproxy's flow id and the event's role: a retried write is the same write."""
    return f"{flow_id}:{role}"
