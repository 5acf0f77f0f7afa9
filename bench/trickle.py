"""What recording costs at an agent's pace: CPU a second at a trickle of requests, beside mitmdump.

A proxy left on always spends most of its life between a few requests a second, not under wrk. Here a
paced client sends `GET /1024` at each rate (default 5, 20 and 100 requests a second) through plain
`mitmdump` and through `flightlog proxy --workers 1` (SQLite, and PostgreSQL with `--configs`), in
interleaved rounds, and the CPU each spends in that time is read from /proc: the proxy process, and
flightlog's writer process apart (its looks at the pipe and its commits are what a trickle costs).
Printed per configuration and rate: CPU milliseconds a second of the proxy, of the writer and both,
their ratio to plain mitmdump's, and the answer->commit p99. A flightlog figure is refused unless
its Ledger holds two events for every request sent.

    python -m bench.trickle [--rates 5,20,100] [--seconds 10] [--rounds 3] [--configs plain,fl-sqlite]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench._probe import probe_line
from bench._upstream import add_load_options, start_upstream, stop_upstream
from bench.capture import Running, cpu_seconds, start, stop

ROW = "{:10} {:>6} {:>10} {:>11} {:>9} {:>8} {:>11}"
HEADER = "config req/s proxy-ms/s writer-ms/s total-ms/s x-plain commit-p99".split()


def paced(port: int, rate: float, seconds: float) -> int:
    """`rate` requests a second to the proxy's reverse listener for `seconds`; how many were answered."""
    sent = 0
    start_at = time.monotonic()
    with httpx.Client(timeout=10) as client:
        while time.monotonic() - start_at < seconds:
            client.get(f"http://127.0.0.1:{port}/1024").raise_for_status()
            sent += 1
            time.sleep(max(0.0, start_at + sent / rate - time.monotonic()))
    return sent


def measure(run: Running, rate: float, seconds: float) -> dict[str, float | None]:
    """CPU a second of the proxy and of its writer process while the trickle runs, then stopped."""
    paced(run.port, rate, 0.5)  # warm: the first requests open connections and tables
    proxy0, writer0 = cpu_seconds(run.proc.pid, writer=False), cpu_seconds(run.proc.pid, writer=True)
    began = time.monotonic()
    answered = paced(run.port, rate, seconds)
    elapsed = time.monotonic() - began
    proxy = (cpu_seconds(run.proc.pid, writer=False) - proxy0) / elapsed * 1000
    writer = (cpu_seconds(run.proc.pid, writer=True) - writer0) / elapsed * 1000
    out: dict[str, float | None] = {"proxy": proxy, "writer": writer}
    out.update(stop(run))
    written = out.get("written")
    if run.stats is not None and (written or 0) < 2 * answered:
        raise RuntimeError(f"the writer stored {written} events for {answered} requests: not a figure")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.trickle", description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="5,20,100", help="requests a second")
    add_load_options(parser, 10.0)
    parser.add_argument("--configs", default="plain,fl-sqlite", help="plain, fl-sqlite, fl-pg")
    opts = parser.parse_args(argv)
    rates = [float(r) for r in opts.rates.split(",")]
    configs = opts.configs.split(",")
    work = Path(tempfile.mkdtemp(prefix="flightlog-bench-"))
    upstream = start_upstream([1024], opts.upstream)
    print(f"upstream: {upstream.kind}", flush=True)
    print(probe_line("before"), flush=True)
    results: dict[tuple[str, float], list[dict[str, float | None]]] = {}
    try:
        stop(start("plain", upstream.port, work))  # one CA for everyone (made by a first mitmdump)
        for round_ in range(opts.rounds):
            for rate in rates:
                for config in configs:
                    row = measure(start(config, upstream.port, work), rate, opts.seconds)
                    results.setdefault((config, rate), []).append(row)
                    total = (row["proxy"] or 0) + (row["writer"] or 0)
                    print(
                        f"round {round_ + 1} {config:9} {rate:>5g}/s: {total:6.1f} ms of CPU a second",
                        flush=True,
                    )
    finally:
        stop_upstream(upstream, work)
    report(results, configs, rates)
    print(probe_line("after"))


def report(
    results: dict[tuple[str, float], list[dict[str, float | None]]], configs: list[str], rates: list[float]
) -> None:
    print()
    print(ROW.format(*HEADER))
    for rate in rates:
        plain = results.get(("plain", rate))
        base = statistics.median((r["proxy"] or 0) + (r["writer"] or 0) for r in plain) if plain else None
        for config in configs:
            rows = results[(config, rate)]
            proxy = statistics.median(r["proxy"] or 0 for r in rows)
            writer = statistics.median(r["writer"] or 0 for r in rows)
            total = statistics.median((r["proxy"] or 0) + (r["writer"] or 0) for r in rows)
            delays = [d for r in rows if (d := r.get("delay_p99")) is not None]
            cells = (
                f"{rate:g}",
                f"{proxy:.1f}",
                f"{writer:.1f}",
                f"{total:.1f}",
                f"{total / base:.2f}" if base else "-",
                f"{statistics.median(delays) * 1000:.0f} ms" if delays else "-",
            )
            print(ROW.format(config, *cells))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
