"""The egress policy for `flightlog mcp-record`: each `tools/call` line a client sends a stdio server.

The same gate as the proxy's (`egress.judge`): a stdio call has no host, so rules naming hosts do not
apply to it; rules naming tools (and arguments), agents, sessions and tasks do, as do retired hosts
hidden in its arguments, `ask` and the default. The relay thread asks it (`recording.mcp.stdio_judge`),
so a held call holds the client's later lines behind it, in order. The policy file is looked at
(one `stat`) before each call, so an edit is in force for the next one.
"""

from __future__ import annotations

import asyncio
import json

from egress.answers import jsonrpc_body
from egress.judge import Gate
from egress.mcp_calls import tool_calls
from egress.rules import Call
from recording.identity import Identity
from recording.mcp.stdio_judge import LineGate, Refused


def stdio_gate(gate: Gate, identity: Identity) -> LineGate:
    """A line gate over `gate` for a session run under `identity`."""

    def check(line: bytes) -> Refused | None:
        calls = tool_calls(line.strip())
        if not calls:
            return None
        gate.live.look()
        for found in calls:
            call = Call(
                "mcp", "", None, "tools/call", "", identity.agent, identity.session, identity.task,
                found.name, found.arguments,
            )  # fmt: skip
            decision = asyncio.run(gate.check(call))
            if not decision.refused:
                continue
            ids = [c.id for c in calls if c.id is not None]
            batch = line.lstrip()[:1] == b"["
            answer = jsonrpc_body(ids, decision, call, batch) + b"\n" if ids else b""
            first = found.id if found.id is not None else (ids[0] if ids else None)
            rpc_id = json.dumps(first, ensure_ascii=False) if first is not None else None
            return Refused(answer, decision.rule, decision.limit, found.name, rpc_id)
        return None

    return check
