"""`flightlog proxy --workers N` against one worker: requests/s as the workers grow, per Ledger engine.

Run as `python -m bench.workers [--seconds S] [--rounds R] [--workers 1,2,3,4] [--engines sqlite,pg]
[--size 1024] [--connections 16]`. Each configuration (an engine and a worker count) runs once a
round, interleaved, on loopback: wrk (one thread, 16 connections) against `flightlog proxy
--workers N` in reverse mode in front of bench.capture's small asyncio upstream, a fresh Ledger
each time (SQLite file, or a new PostgreSQL database on FLIGHTLOG_TEST_PG's server).

Prints per configuration the median req/s, its ratio to one worker of the same engine (medians),
the per-round paired ratio (median and range: drift between rounds cancels), the CPU ms per request
of the proxies (supervisor and workers: their event loops bound the throughput) and of the writer
processes (what one writer fed by every worker would have to do alone on one core), `rest-ms`: the
upstream's and wrk's, `db-ms`: the PostgreSQL server's (every `postgres` process on the machine:
the backends, the WAL writer, the checkpointer; 0 on SQLite, whose work is the writer's). On a
2-core machine they all share the cores with the proxies, so 2 workers can serve at most cores /
(cpu + writer + rest + db) requests per ms: `ceiling` is that rate as a ratio to one worker's
req/s, and `reached` the share of it served), the
answer->commit delay p99 (the worst worker's), and `recorded`: events the writers wrote over two
per request wrk counted (the warm-up's included; slightly above 1.00, as wrk does not count the
requests still in flight when it stops, which are answered and recorded all the same), and
`busiest`: the share of the events recorded by the busiest worker (the kernel spreads connections
by a hash, so 16 connections over 3 workers are rarely even; 1/N is even).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench._needs import need
from bench._pg import create_database, drop_database
from bench._probe import probe_line
from bench._proc import process_cpu
from bench._upstream import Upstream, add_load_options, free_port, start_upstream, stop_upstream
from bench.capture import STATE_FILE, wrk
from flightlog.cores import usable_cores

ROW = "{:7} {:>7} {:>8} {:>6} {:>18} {:>7} {:>9} {:>8} {:>6} {:>10} {:>9} {:>8} {:>7} {:>8}"
HEADER = (
    "engine workers req/s ratio paired-[min-max] cpu-ms writer-ms rest-ms db-ms commit-p99 recorded"
    " busiest ceiling reached"
).split()


@dataclass
class Proxy:
    proc: subprocess.Popen[bytes]
    port: int
    home: Path
    ledger: str


def tree(pid: int) -> list[int]:
    """`pid` and every process below it (supervisor, workers, their writers)."""
    found = [pid]
    for p in found:
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                found += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of the proxies (supervisor and workers) and of the writers."""
    proxies = writers = 0.0
    for p in tree(pid):
        try:
            name = Path(f"/proc/{p}/comm").read_text()
        except OSError:
            continue
        used = process_cpu(p) or 0.0
        if name.startswith("flightlog-writ"):
            writers += used
        else:
            proxies += used
    return proxies, writers


def server_cpu_seconds() -> float:
    """CPU seconds of every PostgreSQL server process on this machine (user + system, and of the
    children each reaped: a backend that ended meanwhile is still counted by the postmaster). While
    the bench runs, its database is the only one at work."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "postgres":
                continue
        except OSError:
            continue
        total += process_cpu(int(proc.name), reaped=True) or 0.0
    return total


def start(engine: str, workers: int, upstream: int, work: Path, ca: Path | None) -> Proxy:
    port = free_port()
    home = work / f"home-{uuid.uuid4().hex[:6]}"
    home.mkdir()
    if ca is not None:
        subprocess.run(["cp", "-r", str(ca), str(home / "mitmproxy")], check=True)
    ledger = create_database() if engine == "pg" else f"sqlite:///{home / 'ledger.db'}"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(FLIGHTLOG_HOME=str(home), FLIGHTLOG_STATS_FILE=str(home / "stats.json"))
    args = [sys.executable, "-m", "flightlog", "proxy", "--workers", str(workers), "--listen", "127.0.0.1:0",
            "--mode", f"reverse:http://127.0.0.1:{upstream}@{port}", "--ledger", ledger,
            "--blobs", (home / "blobs").as_uri()]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the proxy exited with {proc.returncode}")
        try:
            if json.loads((home / STATE_FILE).read_text()).get("pid") == proc.pid:
                return Proxy(proc, port, home, ledger)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the proxy did not start")


def stop(proxy: Proxy) -> tuple[float, float | None, float]:
    """SIGINT, wait for every writer's drain: (events written, the worst commit delay p99 in s, the
    busiest worker's share of the events)."""
    proxy.proc.send_signal(signal.SIGINT)
    try:
        proxy.proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        proxy.proc.kill()
        proxy.proc.wait()
    each = []
    delays = []
    for path in proxy.home.glob("stats*.json"):
        data = json.loads(path.read_text())
        each.append(float(data["written"] or 0))
        if data["delay_p99"] is not None:
            delays.append(data["delay_p99"])
    if proxy.ledger.startswith("postgresql"):
        drop_database(proxy.ledger)
    written = sum(each)
    return written, max(delays, default=None), max(each, default=0.0) / written if written else 0.0


def measure(
    proxy: Proxy, upstream: Upstream, size: int, seconds: float, connections: int
) -> dict[str, float | None]:
    _, _, warm = wrk(proxy.port, size, 1.0, connections)
    server = server_cpu_seconds if proxy.ledger.startswith("postgresql") else lambda: 0.0
    loop_before, writer_before = cpu_seconds(proxy.proc.pid)
    rest_before = upstream.cpu_seconds() + _children_cpu()
    db_before = server()
    rps, p99, total = wrk(proxy.port, size, seconds, connections)
    db_after = server()
    rest_after = upstream.cpu_seconds() + _children_cpu()
    loop_after, writer_after = cpu_seconds(proxy.proc.pid)
    written, delay, busiest = stop(proxy)
    return {
        "rps": rps,
        "p99": p99,
        "cpu": (loop_after - loop_before) / total * 1000,
        "wcpu": (writer_after - writer_before) / total * 1000,
        "rest": (rest_after - rest_before) / total * 1000,
        "db": (db_after - db_before) / total * 1000,
        "delay": delay,
        "recorded": written / (2 * (warm + total)),
        "busiest": busiest,
    }


def _children_cpu() -> float:
    """CPU seconds of the reaped children (wrk: each run is reaped before the next figure is read)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.splitlines()[0])
    add_load_options(parser, 8.0)
    parser.add_argument("--workers", default="1,2,3,4", help="worker counts (the first is the baseline)")
    parser.add_argument("--engines", default="sqlite,pg")
    parser.add_argument("--size", type=int, default=1024, help="answer size in bytes")
    parser.add_argument("--connections", type=int, default=16)
    opts = parser.parse_args(argv)
    need("wrk")
    counts = [int(n) for n in opts.workers.split(",")]
    engines = opts.engines.split(",")
    work = Path(tempfile.mkdtemp(prefix="flightlog-bench-workers-"))
    upstream = start_upstream([opts.size], opts.upstream)
    upstream_port = upstream.port
    print(f"upstream: {upstream.kind}", flush=True)
    print(probe_line("before"), flush=True)
    results: dict[tuple[str, int], list[dict[str, float | None]]] = {}
    try:
        first = start(engines[0], 1, upstream_port, work, None)  # one CA for every run after it
        stop(first)
        ca = first.home / "mitmproxy"
        for round_ in range(opts.rounds):
            for engine in engines:
                for n in counts:
                    proxy = start(engine, n, upstream_port, work, ca)
                    row = measure(proxy, upstream, opts.size, opts.seconds, opts.connections)
                    results.setdefault((engine, n), []).append(row)
                    print(f"round {round_ + 1} {engine:6} {n} workers: {row['rps']:7.0f} req/s", flush=True)
    finally:
        stop_upstream(upstream, work)
    report(results, engines, counts)
    print(probe_line("after"))


def report(
    results: dict[tuple[str, int], list[dict[str, float | None]]], engines: list[str], counts: list[int]
) -> None:
    print()
    print(ROW.format(*HEADER))
    for engine in engines:
        base = [r["rps"] or 0.0 for r in results[(engine, counts[0])]]
        for n in counts:
            rows = results[(engine, n)]
            rps = statistics.median(r["rps"] or 0.0 for r in rows)
            paired = [(r["rps"] or 0.0) / b for r, b in zip(rows, base, strict=True) if b]
            spread = f"{statistics.median(paired):.2f} [{min(paired):.2f}-{max(paired):.2f}]"
            delays = [r["delay"] for r in rows if r["delay"] is not None]
            ceiling = cores_ceiling(rows)
            cells = (
                f"{rps:.0f}",
                f"{rps / statistics.median(base):.2f}",
                spread,
                f"{statistics.median(r['cpu'] or 0.0 for r in rows):.2f}",
                f"{statistics.median(r['wcpu'] or 0.0 for r in rows):.2f}",
                f"{statistics.median(r['rest'] or 0.0 for r in rows):.2f}",
                f"{statistics.median(r.get('db') or 0.0 for r in rows):.2f}",
                f"{statistics.median(delays) * 1000:.0f} ms" if delays else "-",
                f"{min(r['recorded'] or 0.0 for r in rows):.2f}",
                f"{statistics.median(r['busiest'] or 0.0 for r in rows):.2f}",
                f"{ceiling / statistics.median(base):.2f}" if ceiling else "-",
                f"{rps / ceiling:.0%}" if ceiling else "-",
            )
            print(ROW.format(engine, n, *cells))
        last = results[(engine, counts[-1])]
        if ceiling := cores_ceiling(last):
            print(
                f"{engine}: every core busy at {ceiling:.0f} req/s with {counts[-1]} workers "
                f"({usable_cores()} cores / {per_request_ms(last):.2f} ms per request): a ratio of at "
                f"most {ceiling / statistics.median(base):.2f} to one worker"
            )


def per_request_ms(rows: list[dict[str, float | None]]) -> float:
    """The CPU ms a request took in all (proxies, writers, upstream and wrk, the PostgreSQL server),
    median over rows."""
    return statistics.median(
        (r["cpu"] or 0) + (r["wcpu"] or 0) + (r["rest"] or 0) + (r.get("db") or 0) for r in rows
    )


def cores_ceiling(rows: list[dict[str, float | None]]) -> float | None:
    """The req/s at which every usable core would be busy at the CPU a request these runs
    measured: what no worker count can exceed here."""
    per_request = per_request_ms(rows)
    return usable_cores() * 1000 / per_request if per_request else None


if __name__ == "__main__":
    main(sys.argv[1:])
