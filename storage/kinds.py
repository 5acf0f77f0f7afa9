"""Every event kind written to the Ledger, in one place so readers and writers agree.

Storage is the lowest room both sides see: capture and the door (addons) write these kinds; the join
(catalog), readback and the browser read them. Capture's kinds:

- `http.request`: what a client sent through the proxy (head + body).
- `http.response`: the answer to it, or the upstream failure (refused, TLS, timeout, reset) in `error`.
- `websocket.client` / `websocket.server`: one message of an upgraded connection, from that side
  (the 101 answer is the exchange's `http.response`; all share its `action_id`).
- `websocket.close`: how the connection ended: the close code in `status`, the reason as payload.
- `connection.error`: a client connection that failed before any exchange on it: the client refused
  the proxy's certificate, or the upstream connection a reverse listener opens as a client connects
  could not be made (the client saw its connection closed). The target in `url`, why in `error`.
- `capture.lost`: exchanges a proxy answered and could not record (it was killed while its writer was
  behind): the count in `error`, their ids as the payload (`recording.writer.lost`).
- `capture.overflow`: the writer's queue was full and items were dropped; the count is in `error`.
- `capture.unrecordable`: a record the Ledger refused (or that could not become an event): its head
  and body bytes, the error in `error`, the refused event's id in `parent`.

The dispatch door's kinds (one dispatch is one action; `door.dispatch_record` says what each
event holds): `dispatch.call`, `dispatch.dry_run`, `dispatch.upstream.request`,
`dispatch.upstream.response`, `dispatch.reply` and `dispatch.refused`.

The egress policy's kinds (`egress`, `recording.refusal_events`): `policy.refused`, a call the policy
refused: the rule and the limit in `error` (`RULE: LIMIT`), the answer the caller got instead as
payload, joined to the call's action (its `http.request`, its `mcp.tools/call`); and
`connection.attempt`, what opens the action of a refused call that has no event of its own (a
CONNECT, a raw TCP or UDP connection, a DNS question from a sealed command).

The Ledger's own records: `ledger.prune`, a pruning (`storage.retention.prune`): its payload is the
prune record, signed by the operator's root key, naming the payloads whose bytes were removed and why.

MCP messages (one event per JSON-RPC message, read by `formats.jsonrpc`; their kind is `mcp_kind`):
`mcp.<method>` / `mcp.<method>.result` (`mcp.result` when the call was not seen), from a stdio session
(`flightlog mcp-record`, `recording.mcp.stdio_events`) or from an exchange through the proxy
(`recording.mcp.http_messages`); `mcp.invalid`: a stdio line that is not JSON-RPC; `mcp.start` /
`mcp.exit`: a stdio session's start and end (the exit code in `status`).
"""

from __future__ import annotations

from typing import Final

HTTP_REQUEST: Final = "http.request"
HTTP_RESPONSE: Final = "http.response"
CONNECTION_ERROR: Final = "connection.error"
CAPTURE_OVERFLOW: Final = "capture.overflow"
CAPTURE_LOST: Final = "capture.lost"
CAPTURE_UNRECORDABLE: Final = "capture.unrecordable"
WEBSOCKET_KINDS: Final = {
    "client": "websocket.client",
    "server": "websocket.server",
    "close": "websocket.close",
}

DISPATCH_CALL: Final = "dispatch.call"
DISPATCH_DRY_RUN: Final = "dispatch.dry_run"
DISPATCH_UPSTREAM_REQUEST: Final = "dispatch.upstream.request"
DISPATCH_UPSTREAM_RESPONSE: Final = "dispatch.upstream.response"
DISPATCH_REPLY: Final = "dispatch.reply"
DISPATCH_REFUSED: Final = "dispatch.refused"

POLICY_REFUSED: Final = "policy.refused"
CONNECTION_ATTEMPT: Final = "connection.attempt"
REFUSED_KINDS: Final = (DISPATCH_REFUSED, POLICY_REFUSED)
"""Every kind that records a refusal: the door's and the egress policy's."""
REFUSED: Final = "refused"
"""A filter's `kind` naming every refusal kind at once (no event is of this kind itself)."""

CREDENTIAL_SWAPPED: Final = "credential.swapped"
"""Lent placeholders swapped for the real secrets on an exchange to their hosts (`egress.credential_swap`):
the secrets' names in `redacted`, joined to the exchange's action."""

LEDGER_PRUNE: Final = "ledger.prune"

MCP_PREFIX: Final = "mcp."
MCP_TOOL_CALL: Final = "mcp.tools/call"
MCP_TOOL_RESULT: Final = "mcp.tools/call.result"
MCP_INITIALIZE_RESULT: Final = "mcp.initialize.result"
MCP_START: Final = "mcp.start"
MCP_EXIT: Final = "mcp.exit"
MCP_INVALID: Final = "mcp.invalid"
MCP_UNKNOWN_RESULT: Final = "mcp.result"
MCP_RESULT_SUFFIX: Final = ".result"

REQUEST_ROLE: Final = "request"
RESPONSE_ROLE: Final = "response"
REFUSED_ROLE: Final = "refused"
ATTEMPT_ROLE: Final = "attempt"
SWAPPED_ROLE: Final = "swapped"
DISPATCH_CALL_ROLE: Final = "call"
"""A door call's own event (`ACTION:call`, `door.dispatch_record`): its span's id in a trace."""


def event_id(flow_id: str, role: str) -> str:
    """A stable event id from the exchange's id (for the proxy, derived from mitmproxy's flow id) and
    the event's role: a retried write is the same write."""
    return f"{flow_id}:{role}"


def mcp_kind(shape: str, method: str | None, call_method: str | None = None) -> str:
    """The kind of one MCP message (`formats.jsonrpc.Message`'s shape and method): `mcp.<method>`
    for a call or notification, `mcp.<call's method>.result` for an answer (`mcp.result` when the
    call was not seen), `mcp.invalid` for what is not a message."""
    if shape == "invalid":
        return MCP_INVALID
    if shape == "answer":
        return f"{MCP_PREFIX}{call_method}{MCP_RESULT_SUFFIX}" if call_method else MCP_UNKNOWN_RESULT
    return f"{MCP_PREFIX}{method}"
