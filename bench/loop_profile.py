"""Where the proxy's event loop spends its CPU per request: py-spy on plain mitmdump and on flightlog
under the same wrk load, side by side.

Run as `python -m bench.loop_profile [--seconds S] [--rounds R] [--size BYTES] [--top N]`. Each round
starts plain mitmdump and flightlog (SQLite) in turn, as `bench.capture` does, and samples the proxy
process with `py-spy record` while wrk runs. Samples are summed per frame (function and file, every
frame of a stack, so the figures are inclusive) and turned into milliseconds per request; what the
process used in all is its CPU time per request from /proc. Printed: each proxy's CPU per request,
the time in flightlog's own code (frames in addons/, in all and split per top frame), and the frames
that differ most between the two. Under load py-spy counts a runnable thread waiting for a core as
busy, so compare the two columns of one run, not runs of different days.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._needs import Skip, need
from bench._upstream import add_load_options, start_upstream, stop_upstream
from bench.capture import cpu_seconds, start, stop, wrk

ROOT = str(Path(__file__).resolve().parents[1])
"""This checkout: its frames are named from here (`addons/master.py`), others from site-packages."""
RATE = 250
"""Samples per second."""
CONFIGS = ("plain", "fl-sqlite")
OWN = re.compile(r"\(addons/")
"""A frame of flightlog's own code (the hook path lives in addons/)."""
LOOP = "BaseEventLoop._run_once ("
LOOP_FRAME = "BaseEventLoop._run_once (asyncio/base_events.py)"
DISPATCH = "addons/hook_dispatch.py"
"""mitmproxy's hook dispatch (flightlog's shortcut of it): the hooks it calls are what is ours."""
IDLE = "EpollSelector.select ("


def py_spy() -> str:
    """py-spy next to this Python (a venv's pip install) or on the PATH."""
    found = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not found:
        raise Skip("needs py-spy (pip install py-spy), which is not installed")
    return found


def frame_key(frame: str) -> str:
    """`function (path)` without the line number and the site-packages prefix."""
    frame = re.sub(r":\d+\)$", ")", frame).replace(f"({ROOT}/", "(")
    return re.sub(r"\(.*/site-packages/", "(", frame)


def inclusive(raw: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Busy samples of the event loop's thread per frame (each frame counted once per stack; a
    sample waiting in the selector is idle), and flightlog's own samples per outermost own frame
    under the loop (so they add up without double counting)."""
    every: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [frame_key(f) for f in stack.split(";")]
        loop = [i for i, f in enumerate(frames) if f.startswith(LOOP)]
        if not count.isdigit() or not loop or frames[-1].startswith(IDLE):
            continue
        under = frames[loop[-1] :]  # what runs the proxy (mitmdump's or flightlog's CLI) is not compared
        for key in set(under):
            every[key] += int(count)
        first_own = next((f for f in under if OWN.search(f) and DISPATCH not in f), None)
        if first_own is not None:
            own[first_own] += int(count)
    return every, own


def profile(config: str, spy: str, upstream: int, work: Path, size: int, seconds: float) -> dict[str, object]:
    """One proxy under load with py-spy attached: its samples and requests."""
    run = start(config, upstream, work)
    raw = work / f"{config}-{time.monotonic_ns()}.raw"
    try:
        wrk(run.port, size, 1.0)  # warm up
        args = [spy, "record", "--pid", str(run.proc.pid), "-r", str(RATE), "-f", "raw", "-o", str(raw)]
        sampler = subprocess.Popen(
            [*args, "-d", str(round(seconds) + 1)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(0.5)  # attached before the load starts
        before = cpu_seconds(run.proc.pid, writer=False)
        rps, _, total = wrk(run.port, size, seconds)
        cpu = (cpu_seconds(run.proc.pid, writer=False) - before) / total * 1000
        _, err = sampler.communicate()
    finally:
        stop(run)
    if not raw.exists():
        raise Skip(f"py-spy could not sample the proxy: {err.decode(errors='replace').strip()[:200]}")
    every, own = inclusive(raw)
    return {"every": every, "own": own, "requests": total, "cpu": cpu, "rps": rps}


def per_request(samples: float, total: float, cpu: float) -> float:
    """Milliseconds of CPU per request that `samples` stand for: their share of the loop's busy
    samples times the process's CPU per request (py-spy also counts a thread waiting for a core)."""
    return samples / total * cpu if total else 0.0


def report(runs: dict[str, list[dict[str, object]]], top: int) -> None:
    sums: dict[str, collections.Counter[str]] = {}
    owns: dict[str, collections.Counter[str]] = {}
    cpu: dict[str, float] = {}
    for config, rounds in runs.items():
        sums[config], owns[config] = collections.Counter(), collections.Counter()
        for one in rounds:
            sums[config].update(one["every"])  # type: ignore[arg-type]
            owns[config].update(one["own"])  # type: ignore[arg-type]
        cpu[config] = statistics.median(float(one["cpu"]) for one in rounds)  # type: ignore[arg-type]
        rps = statistics.median(float(one["rps"]) for one in rounds)  # type: ignore[arg-type]
        print(
            f"{config:10} CPU {cpu[config]:.3f} ms/request, {rps:.0f} req/s (medians of {len(rounds)} runs)"
        )
    plain, fl = CONFIGS
    busy = {config: float(sums[config][LOOP_FRAME]) for config in CONFIGS}
    own = owns[fl]
    total = per_request(sum(own.values()), busy[fl], cpu[fl])
    print(f"\nflightlog's own code (addons/): {total:.3f} ms/request")
    for key, count in own.most_common(top):
        print(f"  {per_request(count, busy[fl], cpu[fl]):7.3f}  {key}")
    print(f"\nframes that differ most (ms/request, inclusive): {'plain':>7} {'flightlog':>9}  frame")
    rows = []
    for key in set(sums[plain]) | set(sums[fl]):
        a = per_request(sums[plain][key], busy[plain], cpu[plain])
        b = per_request(sums[fl][key], busy[fl], cpu[fl])
        rows.append((a, b, key))
    rows.sort(key=lambda row: abs(row[1] - row[0]), reverse=True)
    for a, b, key in rows[:top]:
        print(f"  {b - a:+7.3f} {a:7.3f} {b:9.3f}  {key[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_profile", description=__doc__.splitlines()[0])
    add_load_options(parser, 10.0, "sampled")
    parser.add_argument("--size", type=int, default=1024, help="answer size in bytes")
    parser.add_argument("--top", type=int, default=15, help="frames listed")
    opts = parser.parse_args()
    need("wrk")
    spy = py_spy()
    work = Path(tempfile.mkdtemp(prefix="flightlog-profile-"))
    upstream = start_upstream([opts.size], opts.upstream)
    upstream_port = upstream.port
    print(f"upstream: {upstream.kind}", flush=True)
    try:
        stop(start("plain", upstream_port, work))  # one CA for everyone
        runs: dict[str, list[dict[str, object]]] = {config: [] for config in CONFIGS}
        for round_ in range(opts.rounds):
            for config in CONFIGS:
                one = profile(config, spy, upstream_port, work, opts.size, opts.seconds)
                runs[config].append(one)
                print(f"round {round_ + 1} {config:9} {opts.size:>7} B: {one['rps']:.0f} req/s", flush=True)
        print()
        report(runs, opts.top)
    finally:
        stop_upstream(upstream, work)


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        sys.exit(f"bench.loop_profile: {e}")
