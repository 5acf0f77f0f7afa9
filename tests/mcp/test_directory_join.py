"""MCP rows joined to recorded MCP calls: import, record through `mcp-record`, `uses`, `trace`, and the
wrapped configuration that `contracts` and `directory import mcp` print."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from storage.ledger import open_ledger
from tests.mcp.support import FLIGHTLOG, SDK_SERVER, recorded, session_events


def _flightlog(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([FLIGHTLOG, *args], capture_output=True, text=True, timeout=120)
    assert not check or done.returncode == 0, done.stderr
    return done


async def _calls(command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:])
    with anyio.fail_after(60):
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("add", {"a": 1, "b": 2})
            await s.call_tool("add", {"a": "one", "b": 2})  # does not fit the schema: flagged
            await s.call_tool("echo", {"text": "hi"})


def test_recorded_calls_join_their_row_with_mismatches_flagged(tmp_path: Path, home: Path) -> None:
    """After `directory import mcp`, the row carries the server's identity; `uses add` lists both
    recorded calls of `add` (not `echo`'s) each with its result, the one whose arguments do not fit
    the row's schema flagged; `trace` goes from a call to its row and exits 1 on the mismatch;
    "which MCP tools did agent alpha call today" counts the calls by tool; the import
    prints the wrapped configuration for Claude Code, Cursor and VS Code."""
    folder, ledger_url = tmp_path / "directory", f"sqlite:///{tmp_path / 'ledger.db'}"
    blobs = (tmp_path / "blobs").as_uri()
    folder.mkdir()
    imported = _flightlog("directory", "import", "mcp", "--directory", str(folder), "--", *SDK_SERVER)
    claude = ["claude", "mcp", "add", "flightlog-test-server", "--", "flightlog", "mcp-record", "--agent"]
    assert shlex.join([*claude, "claude-code", "--", *SDK_SERVER]) in imported.stdout
    assert "recorded_cursor" in imported.stdout and "recorded_vscode" in imported.stdout
    assert "name: flightlog-test-server" in (folder / "tool" / "add.md").read_text()
    anyio.run(_calls, recorded(SDK_SERVER, "--agent", "alpha", "--ledger", ledger_url, "--blobs", blobs))
    session_events(open_ledger(ledger_url, blobs))

    found = json.loads(
        _flightlog("uses", "add", "--directory", str(folder), "--ledger", ledger_url, "--json").stdout
    )
    calls = [e for e in found if e["kind"] == "mcp.tools/call"]
    results = [e for e in found if e["kind"] == "mcp.tools/call.result"]
    assert [c["arguments"] for c in calls] == [{"a": 1, "b": 2}, {"a": "one", "b": 2}]
    assert calls[0]["mismatch"] == "" and "'one' is not of type 'integer'" in calls[1]["mismatch"]
    assert [r["action_id"] for r in results] == [c["action_id"] for c in calls]

    ok = _flightlog(
        "trace", calls[0]["event_id"], "--directory", str(folder), "--ledger", ledger_url, "--json"
    )
    assert json.loads(ok.stdout)["tool"] == "add" and json.loads(ok.stdout)["mismatch"] == ""
    bad = _flightlog("trace", results[1]["event_id"], "--directory", str(folder), "--ledger", ledger_url,
                     check=False)  # fmt: skip
    assert bad.returncode == 1 and "MISMATCH" in bad.stdout

    asked = _flightlog(
        "ledger", "ask", "which MCP tools did agent alpha call today", "--ledger", ledger_url, "--json"
    )
    groups = {g["key"]: g["events"] for g in json.loads(asked.stdout)["groups"]}
    assert groups == {"add": 2, "echo": 1}

    vscode = _flightlog("contracts", "add", "--directory", str(folder), "--form", "recorded_vscode").stdout
    entry = json.loads(vscode)["servers"]["flightlog-test-server"]
    assert entry == {
        "type": "stdio",
        "command": "flightlog",
        "args": ["mcp-record", "--agent", "vscode", "--", *SDK_SERVER],
    }
    cursor = json.loads(
        _flightlog("contracts", "add", "--directory", str(folder), "--form", "recorded_cursor").stdout
    )
    assert cursor["mcpServers"]["flightlog-test-server"]["args"][-len(SDK_SERVER) :] == SDK_SERVER
