"""The seccomp filter of a sealed command: the system calls its namespaces do not already take away.

The namespaces make most of these fail anyway (no capability in the sandbox's user namespace); the
filter refuses them whatever the kernel's or bwrap's state, each with EPERM, so a probe sees a plain
refusal. Grouped by what they would reach:

- other processes: `ptrace`, `process_vm_readv/writev`, `pidfd_getfd`, `kcmp`;
- other namespaces and new ones: `setns`, `unshare`, and `clone` with any CLONE_NEW* flag (a raw
  clone makes a user namespace without `unshare`); `clone3` says ENOSYS, so libc falls back to
  `clone`, whose flags the filter can read (clone3's are behind a pointer);
- the mount table: `mount`, `umount2`, `pivot_root`, `chroot`, the new mount API;
- the kernel: `bpf`, `perf_event_open`, keyrings, `io_uring_*` (its operations bypass this filter),
  modules, `kexec_*`, `reboot`, the clock, swap, `acct`, `quotactl`, `syslog`, `userfaultfd`,
  `open_by_handle_at` (reads files by handle, past the mounts);
- the network's configuration and raw frames: new AF_NETLINK and AF_PACKET sockets;
- host UNIX sockets: a new AF_UNIX socket, unless the operator named sockets to bind in
  (`socketpair`, a process's own pipes, is not refused);
- the terminal: `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` (typing into the operator's terminal).

libseccomp (`pyseccomp`, its ctypes bindings) compiles the rules; bwrap loads the BPF program from a
memory file (`--seccomp FD`) after setting no_new_privs, just before the command runs.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Final

from flightlog.errors import CommandError

REFUSED: Final = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "setns", "unshare",
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff", "acct",
    "quotactl", "syslog", "userfaultfd", "open_by_handle_at",
)  # fmt: skip
"""Refused outright, with EPERM."""
CLONE_NEW: Final = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080,
}  # fmt: skip
"""`clone` is refused with any of these flags."""
SOCKET_FAMILIES: Final = {"AF_NETLINK": socket.AF_NETLINK, "AF_PACKET": socket.AF_PACKET}
"""`socket` is refused for these families (and AF_UNIX unless sockets are named)."""
IOCTLS: Final = {"TIOCSTI": 0x5412, "TIOCLINUX": 0x541C}
"""`ioctl` is refused with these requests."""


def filter_fd(unix_sockets: bool) -> int:
    """A memory file holding the filter's BPF program, at offset 0, for bwrap's `--seccomp FD`
    (the caller passes it to bwrap and closes it). `unix_sockets`: whether new AF_UNIX sockets are
    allowed (the operator named host sockets)."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as e:  # pyseccomp loads libseccomp.so.2 with ctypes on import
        raise CommandError(f"run --sealed: no seccomp filter: libseccomp cannot be loaded ({e})") from e
    refuse = sc.ERRNO(errno.EPERM)
    flt = sc.SyscallFilter(sc.ALLOW)
    for name in REFUSED:
        flt.add_rule(refuse, name)
    for flag in CLONE_NEW.values():
        flt.add_rule(refuse, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    families = [*SOCKET_FAMILIES.values(), *([] if unix_sockets else [socket.AF_UNIX])]
    for family in families:
        flt.add_rule(refuse, "socket", sc.Arg(0, sc.MASKED_EQ, 0xFFFFFFFF, family))
    for request in IOCTLS.values():
        flt.add_rule(refuse, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    fd = os.memfd_create("flightlog-seccomp", 0)
    with os.fdopen(os.dup(fd), "wb") as out:
        flt.export_bpf(out)
    os.lseek(fd, 0, os.SEEK_SET)  # bwrap reads from the offset: at the end it reads nothing (EINVAL)
    return fd
