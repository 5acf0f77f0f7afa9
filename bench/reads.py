"""The read commands' start-to-answer time on a small Ledger, beside `flightlog --help`'s.

Each round runs every command once as a fresh process (`python -m flightlog ...`), interleaved, on
the same SQLite Ledger (`--events` events, seeded here); the figures are medians of wall and CPU
time (user + system) and each command's ratio to `--help` (what a command costs beyond starting
Python and the CLI). Issue 42's goal: `ledger counts`, `query` and `row` within 300 ms.

`--against DIR` runs the same commands from another checkout's source too (its `storage`,
`flightlog`, ... first on PYTHONPATH), side by side in the same rounds: before/after in one run.

    python -m bench reads
    python -m bench.reads [--rounds 9] [--events 200] [--against DIR]
    git archive main | tar -x -C /tmp/main-src && python -m bench.reads --against /tmp/main-src
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.startup import compile_bytecode

GOAL_MS = 300
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("ledger", "counts"),
    ("ledger", "counts", "--by", "model"),
    ("ledger", "query", "--limit", "20"),
    ("ledger", "row", "ev-000001"),
    ("ledger", "tally", "--by", "model", "--by", "kind"),
    ("ledger", "state"),
    ("ledger", "ask", "cost", "by", "model"),
)
GOALED = {"ledger counts", "ledger query --limit 20", "ledger row ev-000001"}


def seed(home: Path, n: int) -> None:
    """`n` events (request/answer pairs of two agents and two models) in `home`'s Ledger."""
    from storage.events import Batch, Event
    from storage.ledger import open_ledger

    t0 = datetime(2026, 11, 30, 12, tzinfo=UTC)
    events = []
    for i in range(n):
        answer = i % 2 == 1
        events.append(
            Event(
                event_id=f"ev-{i:06d}",
                action_id=f"act-{i // 2:06d}",
                kind="http.response" if answer else "http.request",
                direction="out",
                at=t0 + timedelta(seconds=i),
                collector="bench",
                seq=i,
                method="POST",
                url="https://api.example.com/v1/chat",
                host="api.example.com",
                status=200 if answer else None,
                agent=f"agent-{i % 4 // 2}",
                model=("gpt-x" if i % 4 == 1 else "claude-y") if answer else None,
                tokens_in=100 if answer else None,
                tokens_out=20 if answer else None,
                cost_usd=0.001 if answer else None,
                head=b"POST /v1/chat HTTP/1.1\r\nHost: api.example.com",
                payload=b'{"ok": true, "i": %d}' % i,
                payload_state="complete",
            )
        )
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        ledger.append(Batch(collector="bench", position=1, events=tuple(events)))
    finally:
        ledger.close()


def run_once(args: tuple[str, ...], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one `python -m flightlog ARGS` from start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd: the home, not a checkout (`-m` puts the working folder first on sys.path)
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", *args], env=env, capture_output=True, cwd=env["FLIGHTLOG_HOME"]
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"flightlog {' '.join(args)} failed: {done.stderr.decode()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reads", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--against", type=Path, help="another checkout's source folder, run side by side")
    options = parser.parse_args(argv)
    print(compile_bytecode())
    if options.against is not None:  # its bytecode too, as an install would have written it
        compileall.compile_dir(options.against, quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        seed(home, options.events)
        base = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTLOG_")}
        base["FLIGHTLOG_HOME"] = str(home)
        sides = {"this": base}
        if options.against is not None:
            sides["against"] = {**base, "PYTHONPATH": str(options.against.resolve())}
        for env in sides.values():  # once, unmeasured: bytecode written, caches warm
            for args in COMMANDS:
                run_once(args, env)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(options.rounds):
            for args in COMMANDS:
                for side, env in sides.items():
                    times.setdefault((side, " ".join(args)), []).append(run_once(args, env))
    report(times, sides, options.events, options.rounds)


def report(
    times: dict[tuple[str, str], list[tuple[float, float]]],
    sides: dict[str, dict[str, str]],
    events: int,
    rounds: int,
) -> None:
    print(f"{events} events, SQLite, {rounds} rounds; medians (ms) and the ratio to --help's wall time")
    header = f"{'command':44} " + " ".join(f"{s + ' wall':>11} {s + ' cpu':>10} {'x help':>7}" for s in sides)
    if "against" in sides:
        header += f" {'this/against':>13}"
    print(header)
    for args in COMMANDS:
        name = " ".join(args)
        cells = []
        walls = {}
        for side in sides:
            runs = times[(side, name)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            help_wall = statistics.median(w for w, _ in times[(side, "--help")])
            walls[side] = wall
            cells.append(f"{wall:11.0f} {cpu:10.0f} {wall / help_wall:7.2f}")
        line = f"{name:44} " + " ".join(cells)
        if "against" in sides:
            line += f" {walls['this'] / walls['against']:13.2f}"
        if name in GOALED:
            line += f"  [goal <= {GOAL_MS} ms: {'met' if walls['this'] <= GOAL_MS else 'NOT met'}]"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
