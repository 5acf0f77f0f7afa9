"""The sealed command's filesystem as the operator names it: the `[sandbox]` table of the policy file
and `run`'s options add to the defaults, and only what they name changes.

Sealed (as root, the command as nobody): a socket named in `sockets` answers (psql over the host's
PostgreSQL socket) while another host socket stays absent; a credential place named in `read` is
readable while the others stay absent; a `write` path is writable and what is written there is
outside afterwards; `read_deny` (table and option) hides more. Not sealed (pure): the order of the
mounts (a deeper place after the one above it), naming FLIGHTLOG_HOME refused, and a bad table.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from flightlog.errors import CommandError
from flightlog.sandbox.filesystem import CREDENTIALS, FsPolicy, Scratch, hidden, mounts
from flightlog.sandbox.policy_table import parse_table, read_table
from flightlog.sealed import programs, why_not
from tests.egress.sealed_support import NOBODY, nobody_folder

PG_SOCKET = Path("/run/postgresql/.s.PGSQL.5432")


@pytest.fixture
def world() -> Iterator[Path]:
    with nobody_folder("h48-policy-") as folder:
        yield folder


def own(*paths: Path) -> None:
    for path in paths:
        os.chown(path, NOBODY, NOBODY)


@pytest.mark.skipif(
    why_not() is not None or not PG_SOCKET.exists(), reason="as root, with PostgreSQL's socket"
)
def test_named_places_and_sockets_are_there_and_nothing_else(world: Path, tmp_path: Path) -> None:
    """Each line the probe prints is what the command met: the named socket, read and write places
    work; the unnamed socket, credential and denied places are refused."""
    (world / ".aws").mkdir()
    (world / ".aws" / "credentials").write_text("aws-secret\n")
    (world / ".ssh").mkdir()
    (world / ".ssh" / "id_ed25519").write_text("ssh-secret\n")
    out, private, also = world / "out", world / "private", world / "also-private"
    for folder in (out, private, also):
        folder.mkdir()
        (folder / "secret").write_text("kept\n")
    own(world / ".aws", world / ".aws" / "credentials", world / ".ssh", out)
    policy = tmp_path / "egress.toml"
    policy.write_text(
        f'[sandbox]\nsockets = ["{PG_SOCKET}"]\nread = ["{world / ".aws"}"]\n'
        f'write = ["{out}"]\nread_deny = ["{private}"]\n'
    )
    probe = (
        "psql -w -U postgres -d test -h /run/postgresql -tAc 'select 41 + 1' 2>&1; "
        "cat .aws/credentials 2>&1; cat .ssh/id_ed25519 2>&1; "
        "echo written > out/new && echo wrote; cat private/secret 2>&1; cat also-private/secret 2>&1; "
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"/run/mysqld/mysqld.sock\")' "
        "2>&1 | tail -1"
    )
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= {"FLIGHTLOG_HOME": str(tmp_path / "home"), "HOME": str(world)}
    command = [
        sys.executable, "-m", "flightlog", "run", "--sealed", "--policy", str(policy),
        "--read-deny", str(also), "--", "sh", "-c", probe,
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=world, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[:2] == ["42", "aws-secret"]
    assert lines[2] == "cat: .ssh/id_ed25519: Permission denied"
    assert lines[3] == "wrote" and (out / "new").read_text() == "written\n"
    assert lines[4:6] == [
        "cat: private/secret: Permission denied",
        "cat: also-private/secret: Permission denied",
    ]
    assert lines[6] == "FileNotFoundError: [Errno 2] No such file or directory"


def plan(policy: FsPolicy, cwd: Path, tmp_path: Path) -> list[str]:
    scratch = Scratch(tmp_path / "absent", tmp_path / "absent-file")
    return mounts(
        policy, cwd=cwd, flightlog_home=tmp_path / "flhome", home_dirs=[tmp_path / "user"],
        scratch=scratch, user=(os.getuid(), os.getgid()), staged=lambda p: p,
    )  # fmt: skip


def test_a_deeper_place_is_mounted_after_the_one_above_it(tmp_path: Path) -> None:
    """The working directory's bind comes before the cover of FLIGHTLOG_HOME inside it and of a
    credential place under it; a named file under a covered place comes after that cover."""
    user = tmp_path / "user"
    (user / ".aws").mkdir(parents=True)
    (user / ".aws" / "config").write_text("")
    (tmp_path / "flhome").mkdir()
    args = plan(FsPolicy(read=(user / ".aws" / "config",)), tmp_path, tmp_path)
    order = [args[i + 2] for i, a in enumerate(args) if a in ("--bind", "--ro-bind")]
    assert order.index(str(tmp_path)) < order.index(str(tmp_path / "flhome"))
    assert order.index(str(user / ".aws")) < order.index(str(user / ".aws" / "config"))
    at = args.index(str(tmp_path / "flhome"))
    assert args[at - 2 : at] == ["--ro-bind", str(tmp_path / "absent")]


def test_flightlog_home_cannot_be_named(tmp_path: Path) -> None:
    """Naming FLIGHTLOG_HOME (or a place in it), or working there, is one clear error."""
    for policy, cwd in (
        (FsPolicy(write=(tmp_path / "flhome" / "x",)), tmp_path),
        (FsPolicy(), tmp_path / "flhome"),
    ):
        with pytest.raises(CommandError, match="is inside FLIGHTLOG_HOME"):
            plan(policy, cwd, tmp_path)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"writes": ["/x"]}, "unknown key 'writes'"),
        ({"write": "/x"}, "[sandbox] write: a list of paths"),
        ({"sockets": [""]}, "[sandbox] sockets: a list of paths"),
        ([], "sandbox is a table"),
    ],
)
def test_a_bad_table_is_one_line(table: object, said: str, tmp_path: Path) -> None:
    """Every key checked: a misspelt key, a string for a list, an empty path, a non-table."""
    with pytest.raises(CommandError) as raised:
        parse_table(table, tmp_path / "egress.toml")
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_relative_paths_are_the_files_folder_and_home_is_expanded(tmp_path: Path) -> None:
    """`write = ["cache"]` is beside the policy file; `~` is the operator's home."""
    policy = tmp_path / "egress.toml"
    policy.write_text(
        '[[rule]]\naction = "allow"\nhosts = ["a.example"]\n[sandbox]\nwrite = ["cache", "~/x"]\n'
    )
    assert read_table(policy).write == (tmp_path / "cache", Path("~/x").expanduser())
    assert read_table(tmp_path / "missing.toml") == FsPolicy()


def test_sandbox_options_without_sealed_are_one_line(tmp_path: Path) -> None:
    """`--write` (and its kin) shape only a sealed command's sandbox: without --sealed they are an
    error before anything starts, and the command does not run."""
    marker = tmp_path / "ran"
    env = {**os.environ, "FLIGHTLOG_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "flightlog", "run", "--write", str(tmp_path), "--", "touch", str(marker)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and not marker.exists()
    assert done.stderr.strip().splitlines() == [
        "flightlog: --write, --read, --read-deny and --socket shape --sealed's sandbox: add --sealed"
    ]


def test_the_root_stays_read_only_when_it_is_the_working_directory(tmp_path: Path) -> None:
    """Working in / does not make / writable: only a working directory below it is bound writable."""
    args = plan(FsPolicy(), Path("/"), tmp_path)
    assert ["--bind", "/", "/"] not in [args[i : i + 3] for i in range(len(args))]
    assert args[:3] == ["--ro-bind", "/", "/"] and args[-2:] == ["--chdir", "/"]


def _hidden_cases(root: Path) -> list[tuple[str, Path, FsPolicy, str | None]]:
    """(case, path, policy, what hides it or None) for every rule of the sealed world: each default
    place that hides, each credential place, FLIGHTLOG_HOME, the working directory, each kind of
    named place, and what lies between (the root's)."""
    home, cwd, fl_home = root / "home", root / "project", root / "project" / "fl-home"
    absent, denied = "FLIGHTLOG_HOME (absent)", "a credential place or denied (absent)"
    private, deeper = root / "private", root / "p" / "ok"
    cases: list[tuple[str, Path, FsPolicy, str | None]] = [
        ("the root's", Path("/usr/bin/env"), FsPolicy(), None),
        ("the private /tmp", Path("/tmp/tool/bin/run"), FsPolicy(), "private to the sealed command (empty)"),
        ("/tmp named", Path("/tmp/tool/bin/run"), FsPolicy(read=(Path("/tmp/tool"),)), None),
        ("/tmp written", Path("/tmp/tool/bin/run"), FsPolicy(write=(Path("/tmp"),)), None),
        ("/sys", Path("/sys/kernel/notes"), FsPolicy(), "empty inside"),
        ("the CPUs", Path("/sys/devices/system/cpu/online"), FsPolicy(), None),
        ("/run", Path("/run/tool"), FsPolicy(), "emptied (no host socket)"),
        ("/var/run", Path("/var/run/tool"), FsPolicy(), "emptied (no host socket)"),
        ("a socket named", Path("/run/db/.s"), FsPolicy(sockets=(Path("/run/db/.s"),)), None),
        ("the working directory", cwd / "bin" / "run", FsPolicy(), None),
        ("FLIGHTLOG_HOME in it", fl_home / "tool", FsPolicy(), absent),
        ("FLIGHTLOG_HOME under a named place", fl_home / "x", FsPolicy(read=(root,)), absent),
        ("read_deny", private / "t", FsPolicy(read_deny=(private,)), denied),
        ("a deeper one named", deeper / "t", FsPolicy(read_deny=(deeper.parent,), read=(deeper,)), None),
    ]  # fmt: skip
    for place in CREDENTIALS:
        cases.append(
            (f"~/{place}", home / place / "tool", FsPolicy(), "a credential place or denied (absent)")
        )
        cases.append((f"~/{place} named", home / place / "tool", FsPolicy(read=(home / place,)), None))
    return cases


def test_what_a_sealed_command_would_miss_is_named_by_the_place_that_hides_it(tmp_path: Path) -> None:
    """`hidden` answers for every rule of the world the mounts make: the deepest place holding a
    path decides, named places show, and FLIGHTLOG_HOME stays absent whatever holds it."""
    root = tmp_path.resolve()
    for case, path, policy, expected in _hidden_cases(root):
        got = hidden(path, policy, cwd=root / "project", flightlog_home=root / "project" / "fl-home",
                     home_dirs=[root / "home"])  # fmt: skip
        assert (got[1] if got else None) == expected, case


def test_a_folder_the_sandbox_user_cannot_enter_hides_what_is_in_it(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Root runs the command as nobody: a program under a folder nobody may search (a Python under
    /root) is out of sight unless named (named places are bound in from where nobody can reach)."""
    outside_tmp = Path(tempfile.mkdtemp(dir="/var/tmp"))  # /tmp is the sandbox's own anyway
    request.addfinalizer(lambda: shutil.rmtree(outside_tmp))
    outside_tmp.chmod(0o755)
    locked = outside_tmp / "locked"
    (locked / "bin").mkdir(parents=True)
    locked.chmod(0o700)
    tool = locked / "bin" / "tool"

    def as_nobody(policy: FsPolicy, user: tuple[int, int] | None = (NOBODY, NOBODY)) -> object:
        return hidden(tool, policy, cwd=Path("/"), flightlog_home=tmp_path / "fl", home_dirs=[], user=user)

    assert as_nobody(FsPolicy()) == (locked, f"a folder the sandbox's user (uid {NOBODY}) cannot enter")
    assert as_nobody(FsPolicy(read=(locked,))) is None
    assert as_nobody(FsPolicy(), user=None) is None  # not root: the command runs as flightlog's user


def test_what_running_a_program_needs_follows_links_and_interpreters(tmp_path: Path) -> None:
    """The program, each link to it, a script's interpreter (`#!/path` and `#!/usr/bin/env NAME`
    found on PATH), and that interpreter's own links: each must be in sight."""
    tools = tmp_path / "tools"
    tools.mkdir()
    interpreter = tools / "interp"
    interpreter.write_text("#!/bin/sh\n")
    interpreter.chmod(0o755)
    (tools / "interp-link").symlink_to(interpreter)
    direct = tmp_path / "direct"
    direct.write_text(f"#!{tools / 'interp-link'} -x\n")
    via_env = tmp_path / "via-env"
    via_env.write_text("#!/usr/bin/env -S interp-link --flag\n")
    link = tmp_path / "link"
    link.symlink_to(direct)
    needed = programs(link, None)
    assert needed[:4] == [link, direct, tools / "interp-link", interpreter] and needed[4] == Path("/bin/sh")
    assert programs(via_env, str(tools))[:3] == [via_env, tools / "interp-link", interpreter]
