"""What a sealed command sees of the files: a policy that fits on one screen, as bwrap's mounts.

    /                       read-only (the machine's programs and libraries)
    the working directory   writable (unless it is / itself)
    /tmp                    private: empty, writable, gone when the command ends
    /dev, /proc             a minimal /dev; /proc of the sandbox's own processes only
    /sys                    absent, but for /sys/devices/system/cpu (read-only: CPU counts)
    /run, /var/run          empty (no host socket: D-Bus, docker.sock, databases), read-only
    FLIGHTLOG_HOME          absent, always (the Ledger, its keys, the policy, the approvals)
    credential places       absent (CREDENTIALS: ~/.ssh, ~/.aws, ~/.config/gcloud, ~/.netrc, ...)
    named by the operator   `write` (writable), `read` (a denied place shown, read-only),
                            `read_deny` (more places absent), `sockets` (a host socket bound in)

"Absent" is an empty, unreadable, read-only mount over the place: the command cannot list, read or
write it, and it cannot remove the mount (no capabilities, and the filter refuses umount). A place
named under a hidden one is mounted after it (deeper paths last), so naming `~/.aws/config` shows
that file alone.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from flightlog.errors import CommandError

CREDENTIALS: Final = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".kube", ".docker", ".netrc", ".gnupg", ".npmrc",
    ".pypirc", ".git-credentials", ".config/gh", ".config/hub", ".password-store",
    ".local/share/keyrings", ".vault-token", ".terraform.d", ".cargo/credentials.toml",
    ".config/op", ".pgpass", ".my.cnf",
)  # fmt: skip
"""Well-known credential places, under each home the command could read (see `homes`)."""
EMPTIED: Final = ("/run", "/var/run")
"""Host socket folders: mounted empty and read-only (a named socket is bound in)."""
CPU: Final = Path("/sys/devices/system/cpu")


@dataclass(frozen=True, slots=True)
class FsPolicy:
    """The operator's additions to the defaults (`run` options and the `[sandbox]` table)."""

    write: tuple[Path, ...] = ()
    read: tuple[Path, ...] = ()
    read_deny: tuple[Path, ...] = ()
    sockets: tuple[Path, ...] = ()

    def __or__(self, other: FsPolicy) -> FsPolicy:
        return FsPolicy(
            self.write + other.write,
            self.read + other.read,
            self.read_deny + other.read_deny,
            self.sockets + other.sockets,
        )


@dataclass(frozen=True, slots=True)
class Scratch:
    """What the mounts need from outside: an empty folder and an empty file, both mode 000."""

    empty_dir: Path
    empty_file: Path

    @classmethod
    def make(cls, folder: Path) -> Scratch:
        empty_dir, empty_file = folder / "absent", folder / "absent-file"
        empty_dir.mkdir(mode=0)
        empty_file.touch(mode=0)
        empty_dir.chmod(0)
        empty_file.chmod(0)
        return cls(empty_dir, empty_file)


def homes(uids: Iterable[int], env_home: str | None) -> list[Path]:
    """The homes whose credentials are hidden: $HOME and the home of each user in `uids` (the
    operator, and the user the command runs as)."""
    found = [Path(env_home)] if env_home else []
    for uid in uids:
        try:
            found.append(Path(pwd.getpwuid(uid).pw_dir))
        except KeyError:
            continue
    return _unique(found)


def denied(policy: FsPolicy, home_dirs: Iterable[Path]) -> list[Path]:
    """Every place the command must not see but FLIGHTLOG_HOME: the credential places under each
    home and `read_deny`, less the ones the operator named (`read`, `write`)."""
    named = {_real(p) for p in (*policy.read, *policy.write)}
    places = [h / c for h in home_dirs for c in CREDENTIALS] + list(policy.read_deny)
    return [p for p in _unique(_real(p) for p in places) if p not in named]


def mounts(
    policy: FsPolicy,
    *,
    cwd: Path,
    flightlog_home: Path,
    home_dirs: Iterable[Path],
    scratch: Scratch,
    user: tuple[int, int],
    staged: Callable[[Path], Path],
    files: Mapping[Path, Path] = {},
) -> list[str]:
    """bwrap's mount arguments for `policy` (see the module's docstring) for the command's `user`
    (uid, gid); `files` are bound in read-only, destination from source (the proxy's CA, a
    resolv.conf).

    A named place the user cannot walk down to (root runs the command as nobody, and a tool lives
    in /root) is bound from where flightlog, still root, put it for bwrap to find (`staged`), and the
    folder that stopped the user is an empty, read-only one in the sandbox: the place is there,
    nothing beside it is."""
    fl_home = _real(flightlog_home)
    for path in (cwd, *policy.write, *policy.read, *policy.sockets):
        if _inside(_real(path), fl_home):
            raise CommandError(
                f"run --sealed: {path} is inside FLIGHTLOG_HOME ({fl_home}), which stays hidden"
            )
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/sys"]
    emptied = [p for p in EMPTIED if os.path.isdir(p) and not os.path.islink(p)]
    for place in emptied:
        args += ["--tmpfs", place]
    if CPU.is_dir():
        args += ["--ro-bind", str(CPU), str(CPU)]
    placed: list[tuple[Path, list[str]]] = []
    blocked: list[Path] = []
    named = [
        *((p, "--bind") for p in _unique(_real(p) for p in (cwd, *policy.write)) if p != Path("/")),
        *((p, "--ro-bind") for p in _unique(_real(p) for p in policy.read)),
        *((p, "--bind") for p in _unique(_real(p) for p in policy.sockets)),
    ]
    for path, flag in named:
        stop = first_blocked(path, *user)
        if stop is None:
            placed.append((path, [flag, str(path), str(path)]))
            continue
        if stop not in blocked:
            blocked.append(stop)
            placed.append((stop, ["--tmpfs", str(stop)]))
        placed.append((path, [flag, str(staged(path)), str(path)]))
    for dest, source in files.items():
        placed.append((dest, ["--ro-bind", str(source), str(dest)]))
    with_cwd = FsPolicy(write=(cwd,)) | policy  # the working directory is named by being there
    for path in [*denied(with_cwd, home_dirs), fl_home]:
        if path.exists() and first_blocked(path, *user) is None:  # what it cannot reach is absent already
            cover = scratch.empty_dir if path.is_dir() else scratch.empty_file
            placed.append((path, ["--ro-bind", str(cover), str(path)]))
    for _, group in sorted(placed, key=lambda item: len(item[0].parts)):  # stable: deeper last
        args += group
    for folder in [*emptied, "/sys", *map(str, blocked)]:
        args += ["--remount-ro", folder]
    return [*args, "--chdir", str(cwd)]


def hidden(
    path: Path,
    policy: FsPolicy,
    *,
    cwd: Path,
    flightlog_home: Path,
    home_dirs: Iterable[Path],
    user: tuple[int, int] | None = None,
) -> tuple[Path, str] | None:
    """Whether the sealed command would miss `path`: the place that hides it and what that place
    is (None: it sees it). The rules of `mounts`, the deepest place holding `path` deciding:
    the private /tmp, the emptied socket folders and /sys, the credential places and `read_deny`,
    FLIGHTLOG_HOME hide; the working directory and the named places show (reachable whoever runs
    the command); the rest is the root's, where the command's `user` (uid, gid) must be let in."""
    real = _real(path.parent) / path.name  # a link is a place of its own: where it points is asked apart
    with_cwd = FsPolicy(write=(cwd,) if _real(cwd) != Path("/") else ()) | policy
    rules: list[tuple[Path, str | None]] = [
        (Path("/tmp"), "private to the sealed command (empty)"),
        (Path("/sys"), "empty inside"),
        (CPU, None),
        *((Path(p), "emptied (no host socket)") for p in EMPTIED),
        *((p, "a credential place or denied (absent)") for p in denied(with_cwd, home_dirs)),
        *((_real(p), None) for p in (*with_cwd.write, *with_cwd.read, *with_cwd.sockets)),
        (_real(flightlog_home), "FLIGHTLOG_HOME (absent)"),
    ]
    holding = [
        (len(place.parts), i, place, why) for i, (place, why) in enumerate(rules) if _inside(real, place)
    ]
    *_, place, why = max(holding, default=(0, 0, Path("/"), None))  # the last mounted: deepest, then later
    if why is not None:
        return place, why
    if place == Path("/") and user is not None and (stop := first_blocked(real, *user)) is not None:
        return stop, f"a folder the sandbox's user (uid {user[0]}) cannot enter"
    return None


def first_blocked(path: Path, uid: int, gid: int) -> Path | None:
    """The first folder above `path` that `uid` (group `gid`) may not search, from the root down
    (None: it can walk down to `path`)."""
    if uid == 0:
        return None
    for folder in reversed(path.parents):
        try:
            st = folder.stat()
        except OSError:
            return folder
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return folder
    return None


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
