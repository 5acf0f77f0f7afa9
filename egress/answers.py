"""What a refused caller is told: one clear answer naming the rule and the limit, never a hang.

- An HTTP request: `403 Forbidden`, `Content-Type: application/json`, `X-Flightlog-Refused: RULE`,
  body `{"type": "error", "error": {"type": "refused", "message": ..., "rule": ..., "limit": ...,
  "call": ...}}` (and a budget's or rate's figures): the shape the model APIs answer errors in, so
  the OpenAI and Anthropic SDKs show the message and hand the object over as the error's body. Not
  429: SDKs retry a 429 by themselves, and a refusal is not going to pass on a retry.
- An MCP `tools/call` (over HTTP or stdio): a JSON-RPC error for its id, code `REFUSED_CODE`, message
  `refused by flightlog policy rule RULE: LIMIT`, the same object in `data`. The server never sees it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from egress.rules import Call, Decision

REFUSED_CODE: Final = -32001
"""The JSON-RPC error code of a refused call (in the range JSON-RPC leaves to implementations)."""
HEADER: Final = "X-Flightlog-Refused"
ERROR: Final = "refused by flightlog's egress policy"


def refusal_object(decision: Decision, call: Call) -> dict[str, Any]:
    """What was refused and why: the rule, the limit, the call, and a limit's figures."""
    return {
        "type": "refused",
        "message": f"{ERROR} rule {decision.rule}: {decision.limit}",
        "rule": decision.rule,
        "limit": decision.limit,
        "call": call.target,
        **decision.details,
    }


def http_body(decision: Decision, call: Call) -> bytes:
    """The 403's JSON body."""
    body = {"type": "error", "error": refusal_object(decision, call)}
    return json.dumps(body, ensure_ascii=False).encode() + b"\n"


def jsonrpc_error(request_id: Any, decision: Decision, call: Call) -> dict[str, Any]:
    """A JSON-RPC error answering the refused call `request_id`."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": REFUSED_CODE,
            "message": f"refused by flightlog policy rule {decision.rule}: {decision.limit}",
            "data": refusal_object(decision, call),
        },
    }


def jsonrpc_body(ids: list[Any], decision: Decision, call: Call, batch: bool) -> bytes:
    """The answer to a refused JSON-RPC body: one error per call that has an id (an array for a batch)."""
    errors = [jsonrpc_error(i, decision, call) for i in ids]
    value: Any = errors if batch else (errors[0] if errors else None)
    return json.dumps(value, ensure_ascii=False).encode()
