"""The cores this process may use: what `flightlog proxy` starts one worker per, by default.

`os.cpu_count()` counts the machine's cores, not the ones a process is given. In a container limited
to 2 CPUs on a 64-core host it says 64, and a proxy started there would run 64 workers and 64 writer
processes on two cores' worth of time: each idle pair holds ~140 MiB, and under load they take the
CPU from one another. Two things bound a process on Linux, and both are read here:

- its CPU affinity (`taskset`, a cpuset, Docker's `--cpuset-cpus`): `os.sched_getaffinity`;
- its cgroup's CPU quota (Docker's `--cpus`, Kubernetes' `limits.cpu`): cgroup v2's `cpu.max`, or
  v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us`, the smallest along the process's cgroup and its
  ancestors (a parent's quota bounds every child). A quota of 1.5 CPUs is 2 cores' worth of
  processes, rounded up as Go's runtime and the JVM round it.

Anything unreadable counts as no bound: the answer is never more than the affinity allows, and
never less than 1.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Final

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
V1_CPU: Final = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
"""Where cgroup v1 mounts the `cpu` controller (distributions differ)."""


def v2_limit(cpu_max: str) -> float | None:
    """CPUs a cgroup v2 `cpu.max` allows ("150000 100000" is 1.5), None for "max" or what is not one."""
    fields = cpu_max.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def v1_limit(quota: str, period: str) -> float | None:
    """CPUs a cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us` allow, None for -1 (no quota)."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_paths(proc_cgroup: str) -> dict[str, str]:
    """`/proc/self/cgroup` as {controllers: path}: "" names v2's unified hierarchy (the `0::` line)."""
    paths = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    return paths


def _lineage(folder: Path, root: Path) -> list[Path]:
    """`folder` and each parent up to `root`, the process's own cgroup first."""
    chain = [folder]
    while chain[-1] != root and root in chain[-1].parents:
        chain.append(chain[-1].parent)
    return chain


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_limit(proc_cgroup: str, root: Path = CGROUP_ROOT) -> float | None:
    """The smallest CPU quota over the process's cgroup and its ancestors, v2 or v1; None if none.

    Inside a container with its own cgroup namespace the path is "/", the container's own group,
    mounted at `root`: the walk then reads that one folder."""
    paths = cgroup_paths(proc_cgroup)
    limits: list[float] = []
    unified = paths.get("")
    if unified is not None and (root / "cgroup.controllers").exists():
        for folder in _lineage(root / unified.lstrip("/"), root):
            text = _read(folder / "cpu.max")
            limit = v2_limit(text) if text is not None else None
            if limit is not None:
                limits.append(limit)
    else:
        own = next((p for controllers, p in paths.items() if "cpu" in controllers.split(",")), None)
        mount = next((root / name for name in V1_CPU if (root / name / "cpu.cfs_quota_us").exists()), None)
        if own is not None and mount is not None:
            for folder in _lineage(mount / own.lstrip("/"), mount):
                quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
                limit = v1_limit(quota, period) if quota is not None and period is not None else None
                if limit is not None:
                    limits.append(limit)
    return min(limits, default=None)


def bounded_cores(allowed: int, limit: float | None) -> int:
    """Cores for `allowed` CPUs in the affinity under a quota of `limit` CPUs: the quota rounded up,
    never above the affinity, never below 1."""
    cores = allowed if limit is None else min(allowed, math.ceil(limit))
    return max(1, cores)


def usable_cores() -> int:
    """The cores this process may run on: its affinity, bounded by its cgroup's CPU quota."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        allowed = os.cpu_count() or 1
    return bounded_cores(allowed, cgroup_limit(_read(Path("/proc/self/cgroup")) or ""))
