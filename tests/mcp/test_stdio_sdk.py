"""The official MCP client against an SDK server over stdio, through `flightlog mcp-record`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from storage.ledger import open_ledger
from tests.mcp.support import SDK_SERVER, TAP, lines_of, recorded, session_events


async def _scenario(command: list[str]) -> list[Any]:
    """A fixed conversation: initialize, list, three calls (one failing, one with progress), a
    resource and a prompt; what the client got back, as plain values."""
    params = StdioServerParameters(command=command[0], args=command[1:])
    got: list[Any] = []
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(60):
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            got.append(sorted(t.name for t in (await s.list_tools()).tools))
            got.append((await s.call_tool("add", {"a": 2, "b": 3})).model_dump(mode="json"))
            got.append((await s.call_tool("fail", {"why": "on purpose"})).model_dump(mode="json"))
            got.append(
                (await s.call_tool("count", {"n": 3}, progress_callback=on_progress)).model_dump(mode="json")
            )
            got.append((await s.read_resource("note://greeting")).model_dump(mode="json"))
            got.append((await s.get_prompt("review", {"code": "x = 1"})).model_dump(mode="json"))
    got.append(progress)
    return got


def test_sdk_client_through_mcp_record_sees_the_same_bytes_and_every_message_is_recorded(
    tmp_path: Path,
) -> None:
    """Through `mcp-record`, the client gets what it gets without it, byte for byte on both pipes;
    every line either side sent is one event whose payload is that line; each call and its result
    share an action; tools/call events name the tool; the failing call's result carries the error;
    progress notifications join their call; the session ends with the server's exit code."""
    ledger_url, blobs_url = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    bare = anyio.run(_scenario, [*TAP, str(tmp_path / "bare"), *SDK_SERVER])
    server = [*TAP, str(tmp_path / "server"), *SDK_SERVER]
    options = ("--agent", "alpha", "--ledger", ledger_url, "--blobs", blobs_url)
    through = anyio.run(_scenario, [*TAP, str(tmp_path / "client"), *recorded(server, *options)])
    assert through == bare
    assert bare[-1] == [1.0, 2.0, 3.0]
    sent_by_client = (tmp_path / "client.in").read_bytes()
    sent_by_server = (tmp_path / "server.out").read_bytes()
    assert (tmp_path / "server.in").read_bytes() == sent_by_client == (tmp_path / "bare.in").read_bytes()
    assert (tmp_path / "client.out").read_bytes() == sent_by_server == (tmp_path / "bare.out").read_bytes()

    ledger = open_ledger(ledger_url, blobs_url)
    sessions = session_events(ledger)
    assert len(sessions) == 1
    events = next(iter(sessions.values()))
    for side, sent in (("c", sent_by_client), ("s", sent_by_server)):
        lines = lines_of(events, side)
        assert [ledger.payload(e.payload_sha256) for e in lines] == sent.split(b"\n")[:-1]
    assert all(e.agent == "alpha" for e in events)
    by_kind: dict[str, list[Any]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    calls, results = by_kind["mcp.tools/call"], by_kind["mcp.tools/call.result"]
    assert [c.tool for c in calls] == ["add", "fail", "count"]
    assert [r.action_id for r in results] == [c.action_id for c in calls]
    assert [r.tool for r in results] == ["add", "fail", "count"]
    assert [r.error for r in results] == [None, "tool error: Error executing tool fail: on purpose", None]
    for kind in ("mcp.initialize", "mcp.tools/list", "mcp.resources/read", "mcp.prompts/get"):
        (call,) = by_kind[kind]
        (result,) = by_kind[kind + ".result"]
        assert result.action_id == call.action_id and result.method == call.method
    progress = by_kind["mcp.notifications/progress"]
    assert len(progress) == 3 and {p.action_id for p in progress} == {calls[2].action_id}
    assert [json.loads(ledger.payload(p.payload_sha256))["params"]["progress"] for p in progress] == [1, 2, 3]
    (end,) = by_kind["mcp.exit"]
    assert end.status == 0 and end.error is None
    assert {e.direction for e in events} == {"out"}
