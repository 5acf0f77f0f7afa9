"""The egress policy for `flightlog mcp-record`: each `tools/call` line a client sends a stdio server.

The same gate as the proxy's (`egress.judge`) and the same reader (`egress.mcp_calls`): a stdio call
has no host, so rules naming hosts do not apply to it; rules naming tools (and arguments), agents,
sessions and tasks do, as do retired hosts hidden in its arguments, `ask` and the default. A line
that may hold a call but cannot be read for certain (over 8 MiB, broken JSON, a duplicate key) is
refused when a rule looks at tools. The relay thread asks it (`recording.mcp.stdio_judge`), so a
held call holds the client's later lines behind it, in order. The policy file is looked at (one
`stat`) before each call, so an edit is in force for the next one.
"""

from __future__ import annotations

import asyncio
import json

from egress.answers import jsonrpc_body
from egress.judge import Gate
from egress.mcp_calls import calls_in_message
from egress.rules import Call
from recording.identity import Identity
from recording.mcp.stdio_judge import LineGate, Refused


def stdio_gate(gate: Gate, identity: Identity) -> LineGate:
    """A line gate over `gate` for a session run under `identity`."""
    base = Call("mcp", "", None, "tools/call", "", identity.agent, identity.session, identity.task)

    def check(line: bytes) -> Refused | None:
        asked = calls_in_message(line.strip(), base)
        if not asked.tool_calls and not asked.unreadable:
            return None
        gate.live.look()
        for i, call in enumerate(asked.calls):
            decision = asyncio.run(gate.check(call))
            if not decision.refused:
                continue
            ids = asked.ids
            answer = jsonrpc_body(ids, decision, call, asked.batch) + b"\n" if ids else b""
            first = asked.id_of(i)
            rpc_id = json.dumps(first, ensure_ascii=False) if first is not None else None
            return Refused(answer, decision.rule, decision.limit, call.tool, rpc_id)
        return None

    return check
