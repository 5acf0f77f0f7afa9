"""The escape suite: every way out of `run --sealed` the probe can enumerate is tried from inside, and
each must be refused, while an allowed request is still recorded in the same run.

The ways (`escape_probe.WAYS`) are generated from what is there: every process outside (its /proc
root, namespaces, environment, memory; a signal), flightlog's own processes (strace, nsenter), every
new namespace (`unshare` and raw `clone` with each CLONE_NEW* flag), every mount here (umount), mount,
chroot, pivot_root, each denied place and FLIGHTLOG_HOME (read and write, its keys), /sys, the root
folders (write), every UNIX socket outside (by path and abstract name) and psql over the host's
socket, netlink and packet sockets, every setuid and setgid program, each system call the filter
refuses, the terminal's ioctls, and the identity headers. The table (way: tried / refused) is printed.

Run as root (the command as an unprivileged user, a TUN device for its network) and, where the kernel
allows user namespaces, with flightlog itself unprivileged (`setpriv` to nobody).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest
from sqlalchemy import text

from flightlog.sandbox.filesystem import CREDENTIALS, first_blocked
from flightlog.sealed import user_namespaces, why_not
from storage.ledger import open_ledger
from tests.egress import escape_probe
from tests.egress.netns_hosts import network_host
from tests.egress.sealed_support import python_reads

NOBODY = 65534
FILES = {".netrc", ".npmrc", ".pypirc", ".git-credentials", ".vault-token", ".pgpass", ".my.cnf"}
FILES |= {".cargo/credentials.toml"}


class Outside:
    """What the probe asks about the machine outside, answered when it asks (the run is up)."""

    def __init__(self, world: Path, home: Path, user_home: Path) -> None:
        self.world, self.home, self.user_home = world, home, user_home
        self.run_pid = 0
        self.asked: list[str] = []

    def facts(self) -> dict[str, Any]:
        return {
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
            "pidns": os.readlink("/proc/self/ns/pid"),
            "flightlog": sorted(descendants(self.run_pid)),
            "sockets": unix_sockets(),
            "denied": [str(self.user_home / c) for c in CREDENTIALS],
            "home": str(self.home),
            "keys": sorted(str(p) for p in self.home.rglob("*") if p.is_file()),
            "sys": sorted(os.listdir("/sys")),
        }


def descendants(root: int) -> set[int]:
    """`root` and every process below it (the run, its proxy, the helper that became bwrap)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def unix_sockets() -> list[str]:
    """Every bound UNIX socket in this network namespace, by path or as @abstract."""
    names = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8:
            names.add(fields[7])
    return sorted(names)


def serve(outside: Outside) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            outside.asked.append(self.path)
            body = json.dumps(outside.facts()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder the sandbox's user (nobody) may walk into: its home (with a credential in every
    well-known place), the working directory, FLIGHTLOG_HOME (readable to all, so only the seal
    keeps it out)."""
    folder = Path(tempfile.mkdtemp(prefix="h48-escapes-"))
    folder.chmod(0o755)
    user_home, work = folder / "user", folder / "work"
    for place in CREDENTIALS:
        path = user_home / place
        if place in FILES:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("secret\n")
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / "credentials").write_text("secret\n")
    work.mkdir()
    for path in [user_home, work, *user_home.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    home = folder / "flightlog-home"
    home.mkdir(mode=0o755)
    (home / "egress.toml").write_text("")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_probe(world: Path, launcher: list[str]) -> tuple[list[dict[str, Any]], Outside, str]:
    """The probe, sealed as agent alpha: its reports, what it asked, and the Ledger's URL."""
    home, user_home, work = world / "flightlog-home", world / "user", world / "work"
    outside = Outside(world, home, user_home)
    ledger_url = f"sqlite:///{home / 'ledger.db'}"
    with network_host() as host, ExitStack() as stack:
        with host.inside():
            server = ThreadingHTTPServer((host.address, 0), serve(outside))
        stack.callback(server.server_close)
        stack.callback(server.shutdown)
        Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://{host.address}:{server.server_address[1]}/facts"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "HOME": str(user_home)}
        command = [
            *launcher, sys.executable, "-m", "flightlog", "run", "--sealed", *python_reads(),
            "--agent", "alpha", "--session", "s-sealed", "--task", "t-sealed",
            "--", sys.executable, escape_probe.__file__, url,
        ]  # fmt: skip
        proc = subprocess.Popen(
            command, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        outside.run_pid = proc.pid
        try:
            out, err = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines()], outside, ledger_url


def check(reports: list[dict[str, Any]], outside: Outside, ledger_url: str) -> None:
    """Every attempt refused (the table printed), the allowed request and the identity claims recorded."""
    assert outside.asked and outside.asked[0] == "/facts"  # the allowed request reached its host
    home = outside.home
    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            rows = c.execute(
                text("SELECT url, agent, session, task, head FROM events WHERE kind = 'http.request'")
            ).all()
    finally:
        ledger.close()
    facts = [r for r in rows if r.url.endswith("/facts")]
    assert [(r.agent, r.session, r.task) for r in facts] == [("alpha", "s-sealed", "t-sealed")]
    for item in reports:
        if item["way"] == "identity header":
            (row,) = [r for r in rows if r.url.endswith(f"claim={item['target']}")]
            claim = [line for line in row.head.split(b"\r\n") if line.startswith(b"X-Flightlog-Claim: ")]
            item["refused"] = (row.agent, row.session, row.task) == ("alpha", "s-sealed", "t-sealed") and (
                item["said"].encode() in claim[0].split(b": ", 1)[1].split(b";")
            )
    tried, refused = Counter(r["way"] for r in reports), Counter(r["way"] for r in reports if r["refused"])
    print("\nway                      tried  refused")
    for way in tried:
        print(f"{way:<24} {tried[way]:>5}  {refused[way]:>7}")
    print(f"{'all':<24} {sum(tried.values()):>5}  {sum(refused.values()):>7}")
    escaped = [r for r in reports if not r["refused"]]
    assert not escaped, escaped[:20]
    ways = {"/proc/*/root", "/proc/*/ns/*", "/proc/*/environ", "/proc/*/mem", "signal", "ptrace", "nsenter",
            "unshare", "mount", "umount", "chroot", "denied place read", "denied place write",
            "FLIGHTLOG_HOME read", "FLIGHTLOG_HOME write", "/sys", "host socket", "psql", "setuid program",
            "system call", "identity header", "capabilities held", "new socket"}  # fmt: skip
    assert ways <= set(tried), ways - set(tried)


@pytest.mark.skipif(why_not() is not None, reason="as root: the unprivileged run is the other test")
def test_every_way_out_is_refused_as_root(world: Path) -> None:
    """flightlog as root: the command runs as nobody (the working directory's owner) in its
    sandbox, its network a TUN device; every enumerated way out is refused, the allowed request and
    the identity claims are recorded under the run's identity."""
    check(*run_probe(world, launcher=[]))


def unprivileged(world: Path) -> list[str]:
    """A launcher running flightlog as nobody: in a mount namespace of its own where this Python
    (which may live where nobody cannot walk, as in root's home) is bound under an empty, searchable
    folder, then `setpriv` to nobody, no groups, no capabilities."""
    blocked = first_blocked(Path(sys.base_prefix), NOBODY, NOBODY)
    script = 'exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"'
    if blocked is not None:
        stage = world / "python"
        stage.mkdir()
        script = (
            f"mount --bind {sys.base_prefix} {stage} && mount -t tmpfs -o mode=755 none {blocked} && "
            f"mkdir -p {sys.base_prefix} && mount --bind {stage} {sys.base_prefix} && {script}"
        )
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.mark.skipif(not user_namespaces(), reason="the kernel allows no user namespaces here")
def test_every_way_out_is_refused_unprivileged(world: Path) -> None:
    """flightlog itself as nobody (no TUN device: only the proxy's ports lead out, through a user
    namespace): every enumerated way out is refused all the same, the allowed request and the
    identity claims are recorded under the run's identity."""
    home = world / "flightlog-home"
    for path in [home, *home.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    check(*run_probe(world, launcher=unprivileged(world)))
