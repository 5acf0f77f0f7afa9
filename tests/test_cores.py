"""`flightlog.cores`: the cores a process may use, from its affinity and its cgroup's CPU quota.

The cgroup trees here are folders laid out as the kernel's cgroupfs shows them (v2's unified
hierarchy, v1's `cpu` controller), read by the same walk that reads `/sys/fs/cgroup`; the affinity
is the real one (`taskset`, in the proxy's test in tests/capture/test_workers.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flightlog.cores import bounded_cores, cgroup_limit, cgroup_paths, quota_limit, usable_cores, v2_limit


def test_a_v2_cpu_max_is_its_quota_over_its_period_and_max_is_no_bound() -> None:
    assert v2_limit("150000 100000\n") == 1.5
    assert v2_limit("200000 100000") == 2.0
    assert v2_limit("max 100000\n") is None
    for broken in ("", "garbage", "12 0", "-1 100000", "a b"):
        assert v2_limit(broken) is None, broken


def test_a_v1_quota_of_minus_one_is_no_bound() -> None:
    assert quota_limit("50000\n", "100000\n") == 0.5
    assert quota_limit("-1\n", "100000\n") is None
    assert quota_limit("x", "100000") is None


def test_proc_self_cgroup_names_each_hierarchy_and_v2_as_the_empty_one() -> None:
    text = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/user.slice/app.scope\n"
    assert cgroup_paths(text) == {
        "cpu,cpuacct": "/docker/abc",
        "memory": "/docker/abc",
        "": "/user.slice/app.scope",
    }


def _write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_v2_the_smallest_quota_along_the_process_cgroup_and_its_ancestors_bounds_it(tmp_path: Path) -> None:
    """A parent's quota bounds its children: the own group says 3 CPUs, its parent 1.5, the root none."""
    _write(tmp_path, "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "kubepods", "cpu.max", "150000 100000\n")
    _write(tmp_path / "kubepods" / "pod1", "cpu.max", "300000 100000\n")
    assert cgroup_limit("0::/kubepods/pod1\n", tmp_path) == 1.5
    assert cgroup_limit("0::/\n", tmp_path) is None  # the root group has no cpu.max
    _write(tmp_path / "free", "cpu.max", "max 100000\n")
    assert cgroup_limit("0::/free\n", tmp_path) is None


def test_v2_inside_a_container_its_own_group_is_the_mount_root(tmp_path: Path) -> None:
    """With a cgroup namespace the process sees "/" and the container's group mounted at the root."""
    _write(tmp_path, "cgroup.controllers", "cpu\n")
    _write(tmp_path, "cpu.max", "200000 100000\n")
    assert cgroup_limit("0::/\n", tmp_path) == 2.0


def test_v1_reads_the_cpu_controllers_quota_wherever_it_is_mounted(tmp_path: Path) -> None:
    """cgroup v1 (no `cgroup.controllers` at the root; `0::` names only the unified tree)."""
    mount = tmp_path / "cpu,cpuacct"
    _write(mount, "cpu.cfs_quota_us", "-1\n")
    _write(mount, "cpu.cfs_period_us", "100000\n")
    _write(mount / "docker" / "abc", "cpu.cfs_quota_us", "250000\n")
    _write(mount / "docker" / "abc", "cpu.cfs_period_us", "100000\n")
    text = "9:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n"
    assert cgroup_limit(text, tmp_path) == 2.5
    assert cgroup_limit("3:cpu,cpuacct:/\n0::/\n", tmp_path) is None


def test_no_cgroup_filesystem_is_no_bound(tmp_path: Path) -> None:
    assert cgroup_limit("", tmp_path) is None
    assert cgroup_limit("0::/a/b\n", tmp_path / "absent") is None


def test_a_quota_is_rounded_up_and_never_exceeds_the_affinity() -> None:
    assert bounded_cores(64, 2.0) == 2
    assert bounded_cores(64, 1.5) == 2
    assert bounded_cores(64, 0.2) == 1
    assert bounded_cores(4, 8.0) == 4
    assert bounded_cores(4, None) == 4
    assert bounded_cores(0, None) == 1


def test_usable_cores_follows_the_affinity_the_process_was_started_with() -> None:
    """The same call in a child started under `taskset -c 0` says 1, whatever the machine has."""
    assert usable_cores() <= len(os.sched_getaffinity(0))
    code = "from flightlog.cores import usable_cores; print(usable_cores())"
    child = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert child.stdout.strip() == "1"


@pytest.mark.parametrize("proc_cgroup", ["", "not a cgroup file", "0::\n"])
def test_an_unreadable_or_odd_cgroup_file_is_no_bound(proc_cgroup: str, tmp_path: Path) -> None:
    _write(tmp_path, "cgroup.controllers", "cpu\n")
    assert cgroup_limit(proc_cgroup, tmp_path) is None
