"""The machinery the faults bench breaks on purpose, private to it: a PostgreSQL cluster of its own
(restarting the shared one on :5432 would break every other test run on the machine) and a small
tmpfs for a SQLite Ledger that can be filled to the last byte and emptied again.

Both need tools or rights a machine may not have (PostgreSQL's server binaries; root for `mount`):
then `Skip` says which, in one line, and the other scenarios still run.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench._needs import Skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    if initdb := shutil.which("initdb"):
        return Path(initdb).parent
    raise Skip("needs PostgreSQL's server binaries (initdb, pg_ctl: apt-get install postgresql)")


@dataclass
class PrivatePostgres:
    """One cluster in a temporary directory, listening on loopback only, trust authentication."""

    bin: Path
    data: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        argv = [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-s", "-w", "-o", options]
        log = ["-l", str(self.data / "server.log")]
        subprocess.run([*argv, *log, *args], check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as when an operator restarts the server."""
        self._ctl("stop", "-m", "fast")


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """initdb into a temporary directory (as the `postgres` user when we are root: initdb refuses
    root), start it on a free port, and remove it all afterwards."""
    bin_dir = _server_bin()
    as_user: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            raise Skip("running as root needs runuser to start PostgreSQL as the postgres user")
        as_user = [runuser, "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="flightlog-faults-pg-"))
    data = base / "data"
    data.mkdir()
    if as_user:
        shutil.chown(base, "postgres")
        shutil.chown(data, "postgres")
    init = [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
    subprocess.run([*init, "--no-sync"], check=True, capture_output=True, timeout=120)
    server = PrivatePostgres(bin_dir, data, _free_port(), as_user)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server._ctl("stop", "-m", "immediate")
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class SmallDisk:
    """A mounted tmpfs and the file that fills it."""

    path: Path

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self) -> int:
        """Write until the filesystem refuses another byte; the bytes written."""
        written = 0
        block = b"\0" * (1 << 20)
        with self.filler.open("wb", buffering=0) as f:
            for size in (1 << 20, 1 << 12, 1):
                while True:
                    try:
                        written += f.write(block[:size])
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@contextlib.contextmanager
def small_disk(size: str) -> Iterator[SmallDisk]:
    """A tmpfs of `size` (`mount -t tmpfs -o size=...`, root only), unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        raise Skip("the disk-full case mounts a small tmpfs, which needs root")
    base = Path(tempfile.mkdtemp(prefix="flightlog-faults-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(base)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        base.rmdir()
        raise Skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:160]}")
    try:
        yield SmallDisk(base)
    finally:
        for _ in range(20):  # a process that had a file open there may take a moment to let go
            if subprocess.run(["umount", str(base)], capture_output=True, check=False).returncode == 0:
                break
            time.sleep(0.5)
        with contextlib.suppress(OSError):
            base.rmdir()
