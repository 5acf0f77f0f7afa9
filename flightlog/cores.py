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
from collections.abc import Callable
from pathlib import Path
from typing import Final

CGROUP_ROOT: Final = Path("/sys/fs/cgroup")
V1_CPU: Final = ("cpu", "cpu,cpuacct", "cpuacct,cpu")
"""Where cgroup v1 mounts the `cpu` controller (distributions differ)."""


def quota_limit(quota: str, period: str) -> float | None:
    """CPUs a quota of `quota` per `period` microseconds allows; None for no quota (v1's -1, v2's
    "max") or what is not a number."""
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def v2_limit(cpu_max: str) -> float | None:
    """CPUs a cgroup v2 `cpu.max` ("QUOTA PERIOD", "max PERIOD") allows ("150000 100000" is 1.5)."""
    fields = cpu_max.split()
    return quota_limit(*fields) if len(fields) == 2 else None


def _v1_limit(folder: Path) -> float | None:
    """CPUs a cgroup v1 `cpu` folder's `cpu.cfs_quota_us` over `cpu.cfs_period_us` allows."""
    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
    return quota_limit(quota, period) if quota is not None and period is not None else None


def _v2_limit(folder: Path) -> float | None:
    text = _read(folder / "cpu.max")
    return v2_limit(text) if text is not None else None


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
    unified = paths.get("")
    own: str | None
    limit_of: Callable[[Path], float | None]
    if unified is not None and (root / "cgroup.controllers").exists():
        own, mount, limit_of = unified, root, _v2_limit
    else:
        own = next((p for controllers, p in paths.items() if "cpu" in controllers.split(",")), None)
        mount = next((root / name for name in V1_CPU if (root / name / "cpu.cfs_quota_us").exists()), root)
        limit_of = _v1_limit
    if own is None:
        return None
    limits = [limit for f in _lineage(mount / own.lstrip("/"), mount) if (limit := limit_of(f)) is not None]
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
