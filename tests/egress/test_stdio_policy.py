"""The egress policy over stdio: `flightlog mcp-record` with the official MCP client and SDK server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from storage.ledger import open_ledger
from tests.mcp.support import SDK_SERVER, TAP, recorded, session_events

POLICY = """
[[rule]]
name = "no-devil-sums"
action = "deny"
tools = ["add"]
args = { a = "666" }
"""


async def _scenario(command: list[str]) -> list[Any]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    got: list[Any] = []
    with anyio.fail_after(60):
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            got.append((await s.call_tool("add", {"a": 2, "b": 3})).model_dump(mode="json"))
            try:
                await s.call_tool("add", {"a": 666, "b": 1})
                got.append("answered")
            except MCPError as e:
                got.append(str(e))
            got.append((await s.call_tool("echo", {"text": "after"})).model_dump(mode="json"))
    return got


def test_a_refused_stdio_call_never_reaches_the_server(tmp_path: Path) -> None:
    """A `tools/call` the policy refuses by its arguments is answered by `mcp-record` with a JSON-RPC
    error naming the rule (the client raises it); the server's input holds every other line the
    client sent, byte for byte, and not that one; the calls before and after are answered by the
    server as without a policy; the refusal is an event of the call's action naming tool and rule,
    and the session's end lists no call as unanswered."""
    policy = tmp_path / "egress.toml"
    policy.write_text(POLICY)
    ledger_url, blobs_url = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    server = [*TAP, str(tmp_path / "server"), *SDK_SERVER]
    options = ("--agent", "alpha", "--ledger", ledger_url, "--blobs", blobs_url, "--policy", str(policy))
    got = anyio.run(_scenario, [*TAP, str(tmp_path / "client"), *recorded(server, *options)])
    assert got[0]["content"][0]["text"] == "5"
    assert "refused by flightlog policy rule no-devil-sums" in got[1] and "args.a=666" in got[1]
    assert got[2]["content"][0]["text"] == "after"
    client_lines = (tmp_path / "client.in").read_bytes().split(b"\n")
    server_lines = (tmp_path / "server.in").read_bytes().split(b"\n")
    refused_line = next(x for x in client_lines if b"666" in x)
    assert server_lines == [x for x in client_lines if x != refused_line]

    ledger = open_ledger(ledger_url, blobs_url)
    (events,) = session_events(ledger).values()
    (refusal,) = [e for e in events if e.kind == "policy.refused"]
    (call,) = [e for e in events if e.kind == "mcp.tools/call" and e.action_id == refusal.action_id]
    assert refusal.tool == "add" and refusal.agent == "alpha" and refusal.host == "stdio"
    assert refusal.error is not None and refusal.error.startswith("no-devil-sums: deny tools=add args.a=666")
    assert refusal.payload_sha256 is not None
    assert b'"code": -32001' in ledger.payload(refusal.payload_sha256)
    assert call.tool == "add"
    (end,) = [e for e in events if e.kind == "mcp.exit"]
    assert end.error is None or "unanswered" not in end.error


def test_with_a_policy_that_refuses_nothing_the_bytes_are_unchanged(tmp_path: Path) -> None:
    """The line-aware relay a policy needs passes every byte both ways exactly as the byte pump
    does: the client and the server see what they see without flightlog."""
    policy = tmp_path / "egress.toml"
    policy.write_text('[[rule]]\naction = "deny"\ntools = ["nothing_called_so"]\n')
    bare = anyio.run(_scenario, [*TAP, str(tmp_path / "bare"), *SDK_SERVER])
    ledger_url, blobs_url = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    server = [*TAP, str(tmp_path / "server"), *SDK_SERVER]
    options = ("--ledger", ledger_url, "--blobs", blobs_url, "--policy", str(policy))
    through = anyio.run(_scenario, [*TAP, str(tmp_path / "client"), *recorded(server, *options)])
    assert through == bare
    assert (tmp_path / "server.in").read_bytes() == (tmp_path / "client.in").read_bytes()
    assert (tmp_path / "client.out").read_bytes() == (tmp_path / "server.out").read_bytes()
