"""The recording proxy against plain mitmdump: requests/s, p99 latency, peak RSS, commit delay.

Run as `python -m bench.capture [--seconds S] [--rounds R] [--sizes 1024,102400] [--rss-requests N]`.
Configurations, run interleaved (round after round, each size in turn) on loopback with 16
connections (wrk, one thread) against nginx serving files (bench/_upstream.py; a small asyncio server
where nginx cannot be had), every proxy in
reverse mode in front of it:

  plain      mitmdump -q (no addons)
  savefile   mitmdump -q -w FILE
  fl-sqlite  flightlog proxy, SQLite Ledger and blob folder
  fl-pg      flightlog proxy, PostgreSQL Ledger (FLIGHTLOG_TEST_PG's server) and blob folder

Prints one row per configuration and size (medians over rounds) and the ratio to plain, then each
round's ratio to plain in that round (median and range: drift between rounds cancels). Peak RSS is
the proxy's VmHWM plus its writer process's; the answer→committed-row delay (p50/p99) comes from
the writer's own counters.
"RSS after 100k requests" is one named figure: a long run of plain mitmdump and of flightlog (SQLite)
each, until --rss-requests (default 100,000) have been answered; 0 skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench._needs import Skip, need
from bench._pg import create_database, drop_database
from bench._probe import probe_line
from bench._proc import process_cpu
from bench._upstream import add_load_options, free_port, start_upstream, stop_upstream, wait_listening

STATE_FILE = "proxy.json"
"""What `flightlog proxy` writes in FLIGHTLOG_HOME once it listens and its writer is ready."""
CONFIGS = ("plain", "savefile", "fl-sqlite", "fl-pg")
ROW = "{:10} {:>7} {:>6} {:>6} {:>7} {:>6} {:>7} {:>6} {:>9} {:>8} {:>11} {:>11}"
"""Columns: config, size, req/s, its ratio to plain, p99 ms, its ratio, CPU ms per request of the proxy
process (its event loop is what bounds a CPU-bound proxy), the ratio plain/this (the throughput ratio
on an otherwise idle machine), the writer process's CPU ms per request (it runs on the other core),
peak RSS MiB of both processes, answer→committed-row delay p50/p99 ms."""


# -- proxies ----------------------------------------------------------------------------------------


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    port: int
    stats: Path | None
    cleanup: list[str]


def start(config: str, upstream: int, work: Path) -> Running:
    port = free_port()
    target = f"reverse:http://127.0.0.1:{upstream}@{port}"
    confdir = work / "confdir"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    cleanup: list[str] = []
    stats: Path | None = None
    mitmdump = shutil.which("mitmdump", path=str(Path(sys.executable).parent)) or "mitmdump"
    if config in ("plain", "savefile"):
        args = [mitmdump, "-q", "--mode", target, "--set", f"confdir={confdir}"]
        if config == "savefile":
            args += ["-w", str(work / f"flows-{uuid.uuid4().hex[:6]}")]
    else:
        home = work / f"home-{uuid.uuid4().hex[:6]}"
        home.mkdir()
        shutil.copytree(confdir, home / "mitmproxy", dirs_exist_ok=True)
        if config == "fl-pg":
            ledger = create_database()
            cleanup.append(ledger)
        else:
            ledger = f"sqlite:///{home / 'ledger.db'}"
        stats = home / "stats.json"
        env.update(FLIGHTLOG_HOME=str(home), FLIGHTLOG_STATS_FILE=str(stats))
        args = [sys.executable, "-m", "flightlog", "proxy", "--workers", "1", "--listen", "127.0.0.1:0",
                "--mode", target, "--ledger", ledger, "--blobs", (home / "blobs").as_uri()]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc, "proxy")
    if config.startswith("fl-"):  # ready when it says so: proxy.json is written with its start line
        deadline = time.monotonic() + 30
        while not (home / STATE_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return Running(proc, port, stats, cleanup)


def children(pid: int) -> list[int]:
    """The processes a proxy started (flightlog's writer process)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def peak_rss_mib(pid: int) -> float:
    """VmHWM of the proxy plus that of its writer process: both stay resident while it records."""
    total = 0.0
    for proc in (pid, *children(pid)):
        try:
            lines = Path(f"/proc/{proc}/status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM:"))
    return total


def _cpu(pid: int) -> float:
    return process_cpu(pid) or 0.0


def cpu_seconds(pid: int, *, writer: bool) -> float:
    """CPU time (user + system) of the proxy process, or of the writer process(es) it started."""
    return sum(_cpu(child) for child in children(pid)) if writer else _cpu(pid)


def stop(run: Running) -> dict[str, float | None]:
    rss = peak_rss_mib(run.proc.pid)
    run.proc.send_signal(signal.SIGINT)
    try:
        run.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.wait()
    out: dict[str, float | None] = {"rss": rss, "delay_p50": None, "delay_p99": None, "written": None}
    if run.stats is not None and run.stats.exists():
        data = json.loads(run.stats.read_text())
        out.update(delay_p50=data["delay_p50"], delay_p99=data["delay_p99"], written=data["written"])
    for url in run.cleanup:
        drop_database(url)
    return out


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def wrk(port: int, size: int, seconds: float, connections: int = 16) -> tuple[float, float, int]:
    """(requests/s, p99 ms, requests) from wrk with one thread and `connections` connections."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency", f"http://127.0.0.1:{port}/{size}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return rps, float(value) * _UNITS[unit], total


def rss_after(config: str, requests: int, size: int, upstream: int, work: Path) -> tuple[int, float]:
    """(requests answered, peak RSS MiB) of one run of `config` kept under load until `requests`."""
    run = start(config, upstream, work)
    total = 0
    try:
        seconds = 5.0
        while total < requests:
            rps, _, answered = wrk(run.port, size, seconds)
            total += answered
            seconds = max(1.0, min(30.0, (requests - total) / max(rps, 1.0)))
    finally:
        end = stop(run)
    return total, end["rss"] or 0.0


def print_rss_after(requests: int, size: int, upstream: int, work: Path) -> None:
    """The named figure: peak RSS after `requests` answered, flightlog (SQLite) beside plain mitmdump."""
    plain_total, plain = rss_after("plain", requests, size, upstream, work)
    fl_total, fl = rss_after("fl-sqlite", requests, size, upstream, work)
    print(
        f"\nRSS after {requests // 1000}k requests ({size} B): flightlog {fl:.0f} MiB "
        f"(proxy + writer, {fl_total} requests), plain mitmdump {plain:.0f} MiB ({plain_total} requests), "
        f"ratio {fl / plain:.2f}"
        if plain
        else ""
    )


def print_paired(
    results: dict[tuple[str, int], list[dict[str, float | None]]], configs: list[str], sizes: list[int]
) -> None:
    """Each round's requests/s over plain's in the same round, median and range: the machine's drift
    between rounds cancels out, which the ratio of medians above does not do."""
    if "plain" not in configs:
        return
    print("\npaired ratio to plain (per round): median [min-max]")
    for size in sizes:
        plain = [r["rps"] or 0.0 for r in results[("plain", size)]]
        for config in configs:
            if config == "plain":
                continue
            ratios = [(r["rps"] or 0.0) / p for r, p in zip(results[(config, size)], plain, strict=True) if p]
            if ratios:
                low, mid, high = min(ratios), statistics.median(ratios), max(ratios)
                print(f"  {config:10} {size:>7}  {mid:.2f} [{low:.2f}-{high:.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.capture", description=__doc__.splitlines()[0])
    add_load_options(parser, 8.0)
    parser.add_argument("--sizes", default="1024,102400", help="answer sizes in bytes")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument(
        "--rss-requests", type=int, default=100_000, help="requests of the long RSS runs (0: skip them)"
    )
    opts = parser.parse_args()
    need("wrk")
    sizes = [int(s) for s in opts.sizes.split(",")]
    configs = opts.configs.split(",")
    work = Path(tempfile.mkdtemp(prefix="flightlog-bench-"))
    upstream = start_upstream(sizes, opts.upstream)
    upstream_port = upstream.port
    print(f"upstream: {upstream.kind}", flush=True)
    print(probe_line("before"), flush=True)
    try:
        # one CA for everyone (generated by a first mitmdump start)
        warm = start("plain", upstream_port, work)
        stop(warm)
        results: dict[tuple[str, int], list[dict[str, float | None]]] = {}
        for round_ in range(opts.rounds):
            for size in sizes:
                for config in configs:
                    run = start(config, upstream_port, work)
                    wrk(run.port, size, 1.0)  # warm up
                    cpu_before = cpu_seconds(run.proc.pid, writer=False)
                    writer_before = cpu_seconds(run.proc.pid, writer=True)
                    rps, p99, total = wrk(run.port, size, opts.seconds)
                    cpu = (cpu_seconds(run.proc.pid, writer=False) - cpu_before) / total * 1000
                    wcpu = (cpu_seconds(run.proc.pid, writer=True) - writer_before) / total * 1000
                    row: dict[str, float | None] = {
                        "wcpu": wcpu,
                        "rps": rps,
                        "p99": p99,
                        "requests": float(total),
                        "cpu": cpu,
                    }
                    row.update(stop(run))
                    results.setdefault((config, size), []).append(row)
                    print(
                        f"round {round_ + 1} {config:9} {size:>7} B: {rps:7.0f} req/s p99 {p99:6.1f} ms",
                        flush=True,
                    )
        print()
        header = (
            "config size req/s ratio p99ms p99x cpu-ms cpu-x writer-ms RSS-MiB commit-p50 commit-p99".split()
        )
        print(ROW.format(*header))
        for size in sizes:
            base = results.get(("plain", size))
            base_rps = statistics.median(r["rps"] or 0 for r in base) if base else None
            base_p99 = statistics.median(r["p99"] or 0 for r in base) if base else None
            base_cpu = statistics.median(r["cpu"] or 0 for r in base) if base else None
            for config in configs:
                rows = results[(config, size)]
                rps = statistics.median(r["rps"] or 0 for r in rows)
                p99 = statistics.median(r["p99"] or 0 for r in rows)
                cpu = statistics.median(r["cpu"] or 0 for r in rows)
                wcpu = statistics.median(r["wcpu"] or 0 for r in rows)
                cpux = f"{base_cpu / cpu:.2f}" if base_cpu and cpu else "-"
                rss = max(r["rss"] or 0 for r in rows)
                d50 = [r["delay_p50"] for r in rows if r["delay_p50"] is not None]
                d99 = [r["delay_p99"] for r in rows if r["delay_p99"] is not None]
                ratio = f"{rps / base_rps:.2f}" if base_rps else "-"
                p99x = f"{p99 / base_p99:.2f}" if base_p99 else "-"
                c50 = f"{statistics.median(d50) * 1000:.0f}" if d50 else "-"
                c99 = f"{statistics.median(d99) * 1000:.0f}" if d99 else "-"
                cells = (
                    f"{rps:.0f}",
                    ratio,
                    f"{p99:.1f}",
                    p99x,
                    f"{cpu:.2f}",
                    cpux,
                    f"{wcpu:.2f}",
                    f"{rss:.0f}",
                    c50,
                    c99,
                )
                print(ROW.format(config, size, *cells))
        print_paired(results, configs, sizes)
        if opts.rss_requests:
            print_rss_after(opts.rss_requests, sizes[0], upstream_port, work)
        print(probe_line("after"))
    finally:
        stop_upstream(upstream, work)


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        sys.exit(f"bench.capture: {e}")
