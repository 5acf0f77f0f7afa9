"""What `flightlog mcp-record` costs a stdio MCP session: 1,000 round trips, bare against recorded.

`python -m bench.mcp_record [--calls N] [--rounds R]`: the official SDK client calls the `echo`
tool of the SDK test server (tests/mcp/sdk_server.py) N times in sequence (each call waits for its
result), once with the server started directly and once through `flightlog mcp-record` with a
SQLite Ledger, alternating for R rounds. Startup and initialize are outside the timed part.

Prints, per configuration, the best and the median time of the N calls and the ratio recorded/bare
(goal: at most 1.05; on a shared, loaded machine the best of R is the figure least disturbed by
others), then the CPU the recording adds per call, which another process's load does not change:
the CPU the server's process tree (the wrapper and its relay threads, the server, the writer
process; read from /proc) used during the N calls, recorded minus bare, over N. Then the messages
recorded against the messages sent and the Ledger's size on disk per recorded call.

Last, the relay's own latency, which the SDK's ~1 ms per call hides and a loaded machine's noise
swamps in the wall times above: `--pings` round trips of one JSON-RPC line to a plain line-echoing
server (tests/mcp/raw_server.py), each waiting for its answer, bare and through `mcp-record`; the
median round trip of each and their difference (what the relay adds to every call, both hops).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import text

from storage.ledger import open_ledger
from tests.mcp.support import RAW, SDK_SERVER, recorded, session_events

PING = b'{"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"text": "call 1"}}\n'


def _tree_cpu() -> float:
    """CPU seconds (user + system) used so far by this process's descendants that are alive."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    mine: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - mine
        mine |= frontier
    return sum(cpu[pid] for pid in mine)


async def _calls(command: list[str], calls: int) -> tuple[float, float]:
    """Wall time of N calls, and the CPU the server's process tree used meanwhile."""
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.call_tool("echo", {"text": "warm"})
        await anyio.sleep(1.0)  # the writer process is up and idle
        cpu, start = _tree_cpu(), time.perf_counter()
        for i in range(calls):
            await s.call_tool("echo", {"text": f"call {i}"})
        wall = time.perf_counter() - start
        await anyio.sleep(0.6)  # the last batches are committed (mcp-record's writer commits every 250 ms)
        return wall, _tree_cpu() - cpu


def _pings(command: list[str], count: int) -> float:
    """The median seconds of `count` round trips of one line through `command` (after a warm-up)."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    to, back = proc.stdin.fileno(), proc.stdout.fileno()
    times = []
    for n in range(count + 100):
        start = time.perf_counter()
        os.write(to, PING)
        got = b""
        while not got.endswith(b"\n"):
            got += os.read(back, 65536)
        if n >= 100:
            times.append(time.perf_counter() - start)
    proc.stdin.close()
    proc.wait(30)
    return statistics.median(times)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_record")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pings", type=int, default=5000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ledger_url, blobs = f"sqlite:///{root / 'ledger.db'}", (root / "blobs").as_uri()
        through = recorded(SDK_SERVER, "--ledger", ledger_url, "--blobs", blobs)
        walls: dict[str, list[float]] = {"bare": [], "recorded": []}
        cpus: dict[str, list[float]] = {"bare": [], "recorded": []}
        for _ in range(args.rounds):
            for name, command in (("bare", SDK_SERVER), ("recorded", through)):
                wall, cpu = anyio.run(_calls, command, args.calls)
                walls[name].append(wall)
                cpus[name].append(cpu)
        ledger = open_ledger(ledger_url, blobs)
        sessions = session_events(ledger, timeout=60)
        edges = ("mcp.start", "mcp.exit")
        lines = sum(1 for events in sessions.values() for e in events if e.kind not in edges)
        with ledger.engine.connect() as c:
            tool_calls = c.execute(text("SELECT count(*) FROM events WHERE kind = 'mcp.tools/call'")).scalar()
        ledger.close()
        # per session: initialize (+ result) + initialized, the tools/list (+ result) the SDK client
        # makes before its first call, (1 warm-up + N) calls and their results
        sent = args.rounds * (3 + 2 + 2 * (args.calls + 1))
        disk = _size(root)
        pings: dict[str, list[float]] = {"bare": [], "recorded": []}
        for _ in range(args.rounds):
            pings["bare"].append(_pings(RAW, args.pings))
            pings["recorded"].append(
                _pings(recorded(RAW, "--ledger", ledger_url, "--blobs", blobs), args.pings)
            )
    print(f"calls per run            {args.calls} (rounds: {args.rounds})")
    for name in walls:
        print(f"{name:<24} best {min(walls[name]):.3f} s, median {statistics.median(walls[name]):.3f} s")
    ratios = [r / b for r, b in zip(walls["recorded"], walls["bare"], strict=True)]
    best = min(walls["recorded"]) / min(walls["bare"])
    print(f"ratio recorded/bare      best {best:.3f}, per round {[round(r, 3) for r in ratios]}")
    extra = statistics.median(cpus["recorded"]) - statistics.median(cpus["bare"])
    server = statistics.median(cpus["bare"])
    print(
        f"CPU added per call       {extra / args.calls * 1e6:.0f} us (the bare server: "
        f"{server / args.calls * 1e6:.0f} us per call)"
    )
    print(f"messages recorded/sent   {lines}/{sent}")
    per_call = disk / max(1, int(tool_calls or 0))
    print(f"disk per recorded call   {per_call:.0f} bytes ({disk} bytes, {tool_calls} calls)")
    bare_rt, recorded_rt = (statistics.median(pings[k]) * 1e6 for k in ("bare", "recorded"))
    print(
        f"relay round trip         bare {bare_rt:.0f} us, recorded {recorded_rt:.0f} us: "
        f"{recorded_rt - bare_rt:.0f} us added per call (median of {args.pings} x {args.rounds})"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
