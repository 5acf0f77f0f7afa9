"""A real npm MCP server (`@modelcontextprotocol/server-everything`) through `mcp-record`, driven by
the official client. npm installs it into the test session's temporary folder; a failed install fails
the test (the recording of a real third-party server is the point)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from storage.ledger import open_ledger
from tests.mcp.support import lines_of, recorded, session_events

PACKAGE = "@modelcontextprotocol/server-everything"


@pytest.fixture(scope="session")
def everything(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that starts server-everything, installed with npm into a cache folder."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.fail("npm and node are needed to install the npm MCP server")
    cache = tmp_path_factory.mktemp("npm")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), PACKAGE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm could not install {PACKAGE}: {(done.stderr or done.stdout).strip()[-300:]}")
    return [node, str(cache / "node_modules" / PACKAGE / "dist" / "index.js")]


async def _drive(command: list[str]) -> dict[str, Any]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    progress: list[float] = []
    seen: dict[str, Any] = {}

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    with anyio.fail_after(90):
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            seen["tools"] = len((await s.list_tools()).tools)
            seen["sum"] = (await s.call_tool("get-sum", {"a": 2, "b": 5})).content[0].model_dump()["text"]
            await s.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress
            )
            seen["bad_args"] = (await s.call_tool("get-sum", {"a": "x"})).is_error
            seen["resources"] = len((await s.list_resources()).resources)
            await s.read_resource("demo://resource/static/document/features.md")
            with pytest.raises(MCPError):
                await s.read_resource("demo://no-such-resource")
            seen["prompts"] = len((await s.list_prompts()).prompts)
            await s.get_prompt("args-prompt", {"city": "Oslo"})
    seen["progress"] = progress
    return seen


def test_server_everything_tools_resources_prompts_progress_and_errors_are_recorded(
    everything: list[str], tmp_path: Path
) -> None:
    """The client gets the same answers through `mcp-record`; the Ledger has each call paired with
    its result, the tool of each tools/call, the three progress notifications under their call, the
    invalid-arguments result and the unknown resource's JSON-RPC error as errors, and every line."""
    ledger_url, blobs_url = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    bare = anyio.run(_drive, everything)
    through = anyio.run(
        _drive, recorded(everything, "--agent", "alpha", "--ledger", ledger_url, "--blobs", blobs_url)
    )
    assert through == bare
    assert bare["progress"] == [1.0, 2.0, 3.0] and bare["bad_args"] is True
    ledger = open_ledger(ledger_url, blobs_url)
    (events,) = session_events(ledger).values()
    kinds = [e.kind for e in events]
    for kind in ("initialize", "tools/list", "tools/call", "resources/list", "resources/read", "prompts/list",
                 "prompts/get"):  # fmt: skip
        assert f"mcp.{kind}" in kinds and f"mcp.{kind}.result" in kinds, f"{kind} not in {', '.join(kinds)}"
    calls = {e.action_id: e for e in events if e.kind == "mcp.tools/call"}
    results = {e.action_id: e for e in events if e.kind == "mcp.tools/call.result"}
    assert calls.keys() == results.keys()
    assert [c.tool for c in calls.values()] == ["get-sum", "trigger-long-running-operation", "get-sum"]
    assert [results[a].tool for a in calls] == [c.tool for c in calls.values()]
    bad = results[list(calls)[2]]
    assert (bad.error or "").startswith("tool error: MCP error -32602")
    progress = [e for e in events if e.kind == "mcp.notifications/progress"]
    assert len(progress) == 3 and {p.action_id for p in progress} == {list(calls)[1]}
    assert {p.tool for p in progress} == {"trigger-long-running-operation"}
    missing = [e for e in events if e.kind == "mcp.resources/read.result" and e.error]
    assert len(missing) == 1 and (missing[0].error or "").startswith("-32602: ")
    assert "demo://no-such-resource" in (missing[0].error or "")
    for side in ("c", "s"):
        for e in lines_of(events, side):
            assert e.payload_state == "complete"
            json.loads(ledger.payload(e.payload_sha256 or ""))
    (end,) = [e for e in events if e.kind == "mcp.exit"]
    assert end.error is None
