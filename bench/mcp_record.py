"""What `flightlog mcp-record` costs a stdio MCP session: 1,000 round trips, bare against recorded.

`python -m bench.mcp_record [--calls N] [--rounds R]`: the official SDK client calls the `echo`
tool of the SDK test server (tests/mcp/sdk_server.py) N times in sequence (each call waits for its
result), once with the server started directly and once through `flightlog mcp-record` with a
SQLite Ledger, alternating for R rounds. Startup and initialize are outside the timed part. Prints
each configuration's median time for the N calls, the ratio recorded/bare per round and its median
(goal: at most 1.05), the messages recorded against the messages sent, and the Ledger's size on disk
per recorded call (database + blob folder, over the recorded tools/call events).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import text

from storage.ledger import open_ledger
from tests.mcp.support import SDK_SERVER, recorded, session_events


async def _calls(command: list[str], calls: int) -> float:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.call_tool("echo", {"text": "warm"})
        start = time.perf_counter()
        for i in range(calls):
            await s.call_tool("echo", {"text": f"call {i}"})
        return time.perf_counter() - start


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_record")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ledger_url, blobs = f"sqlite:///{root / 'ledger.db'}", (root / "blobs").as_uri()
        through = recorded(SDK_SERVER, "--ledger", ledger_url, "--blobs", blobs)
        bare_times, recorded_times, ratios = [], [], []
        for _ in range(args.rounds):
            bare = anyio.run(_calls, SDK_SERVER, args.calls)
            rec = anyio.run(_calls, through, args.calls)
            bare_times.append(bare)
            recorded_times.append(rec)
            ratios.append(rec / bare)
        ledger = open_ledger(ledger_url, blobs)
        sessions = session_events(ledger, timeout=60)
        lines = sum(
            1 for events in sessions.values() for e in events if e.kind not in ("mcp.start", "mcp.exit")
        )
        with ledger.engine.connect() as c:
            tool_calls = c.execute(text("SELECT count(*) FROM events WHERE kind = 'mcp.tools/call'")).scalar()
        ledger.close()
        # per round: initialize (+ result) + initialized, the tools/list (+ result) the SDK client makes
        # before its first call, (1 warm-up + N) calls and their results
        sent = args.rounds * (3 + 2 + 2 * (args.calls + 1))
        disk = _size(root)
    print(f"calls per run            {args.calls} (rounds: {args.rounds})")
    for label, values, unit in (
        ("bare server", bare_times, "s"),
        ("through mcp-record", recorded_times, "s"),
        ("ratio recorded/bare", ratios, "median"),
    ):
        print(f"{label:<24} {statistics.median(values):.3f} {unit}  ({[round(v, 3) for v in values]})")
    print(f"messages recorded/sent   {lines}/{sent}")
    per_call = disk / max(1, int(tool_calls or 0))
    print(f"disk per recorded call   {per_call:.0f} bytes ({disk} bytes, {tool_calls} calls)")


if __name__ == "__main__":
    main(sys.argv[1:])
