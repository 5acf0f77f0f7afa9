"""What a benchmark needs from the machine, found or installed, or a one-line reason to skip it.

`make bench` runs every benchmark; one that lacks a tool (wrk for the load runs) must not stop the
others, so it raises `Skip` and the runner prints its reason and goes on.
"""

from __future__ import annotations

import os
import shutil
import subprocess


class Skip(Exception):
    """This benchmark cannot run here; the message says why, in one line."""


def need(tool: str, apt_package: str | None = None) -> str:
    """The path of `tool`, installing `apt_package` with apt-get when running as root where it is
    missing; raises Skip when it cannot be had."""
    if found := shutil.which(tool):
        return found
    package = apt_package or tool
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        print(f"bench: {tool} is missing; installing the Debian package {package}", flush=True)
        install = ["apt-get", "install", "-y", "-q", package]
        ok = subprocess.run(install, capture_output=True, check=False).returncode == 0
        if not ok:  # the package lists may be stale on a new machine
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)
            subprocess.run(install, capture_output=True, check=False)
        if found := shutil.which(tool):
            return found
    raise Skip(f"needs {tool} (apt-get install {package}), which is not on this machine")
