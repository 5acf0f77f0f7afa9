"""Start-up of a sealed command: `flightlog run --sealed -- true` beside `flightlog run -- true`.

Both start a proxy of their own for the command (no proxy is running for the temp FLIGHTLOG_HOME)
and stop it after; the sealed one also builds the sandbox (the network namespace and its TUN device
as root, the relay of the proxy's ports, the seccomp filter, bwrap's namespaces and mounts). Rounds
alternate the two, from fresh processes; the figures are the median wall time and CPU time (the
command's and every process below it: steadier on a loaded machine) of each, and their ratios.

    python -m bench.sealed [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._needs import Skip


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process below it)."""
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return elapsed, children_cpu() - cpu


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sealed", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from flightlog.sealed import how

    way, reason = how()
    if way is None:
        raise Skip(f"cannot seal here: {reason}")
    with tempfile.TemporaryDirectory(prefix="bench-sealed-") as folder:
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env |= {"FLIGHTLOG_HOME": str(Path(folder) / "home")}
        flightlog = [sys.executable, "-m", "flightlog", "run"]
        plain, sealed = [*flightlog, "--", "true"], [*flightlog, "--sealed", "--", "true"]
        timed(plain, env)  # the CA and the Ledger are made once, before the rounds
        times: dict[str, list[tuple[float, float]]] = {"plain": [], "sealed": []}
        for _ in range(args.rounds):
            times["plain"].append(timed(plain, env))
            times["sealed"].append(timed(sealed, env))
    network = "a TUN device" if way == "tun" else "a user namespace"
    print(f"{args.rounds} rounds, medians; the sealed command's network: {network}")
    for index, name in enumerate(("wall", "CPU")):
        plain_s = statistics.median(t[index] for t in times["plain"])
        sealed_s = statistics.median(t[index] for t in times["sealed"])
        print(
            f"{name:>4}: run -- true {plain_s * 1000:6.0f} ms, "
            f"run --sealed -- true {sealed_s * 1000:6.0f} ms, "
            f"sealed / plain {sealed_s / plain_s:.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
