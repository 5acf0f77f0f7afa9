"""The policy file fails closed: a file that disappears, empties or stops parsing leaves the last good
policy in force and says so once; `--policy FILE` that is missing at start refuses to start.

First the rule itself (`egress.live.LivePolicy`, every breakage), then a real proxy with two workers
(the default here) and a real client: after each breakage the proxy still refuses what the last
good policy refused, nothing of it reaches the upstream, and the log says so once for the proxy,
not once per worker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from egress.errors import PolicyFileError
from egress.live import LivePolicy
from egress.rules import Call
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import Upstream, upstream

POLICY = """
[[rule]]
name = "no-secrets"
action = "deny"
paths = ["/secret*"]
"""
KEEPING = "keeping the last good egress policy"
REREAD = "egress policy re-read"


def _replace(path: Path, text: str) -> None:
    """Write as an editor that saves by renaming does (a new inode: the stamp always moves)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


BREAKAGES: dict[str, Callable[[Path], None]] = {
    "deleted": lambda p: p.unlink(),
    "emptied": lambda p: _replace(p, ""),
    "truncated in place": lambda p: p.open("w").close(),
    "only whitespace": lambda p: _replace(p, " \n\t\n"),
    "bad TOML": lambda p: _replace(p, "[[rule]\nthis is not toml"),
    "bad rule (malformed host)": lambda p: _replace(p, '[[rule]]\naction = "deny"\nhosts = ["not a host"]\n'),
    "bad rule (unknown key)": lambda p: _replace(p, '[[rule]]\naction = "deny"\nhostz = ["x"]\n'),
    "bad rule (no action)": lambda p: _replace(p, '[[rule]]\nhosts = ["x.example"]\n'),
}
SECRET = Call("http", "api.example", 443, "GET", "/secret/1")
PUBLIC = Call("http", "api.example", 443, "GET", "/public")


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_broken_policy_file_keeps_the_last_good_policy_and_says_so_once(
    breakage: str, tmp_path: Path
) -> None:
    """After the breakage a look keeps the policy (still refusing what it refused), says one line
    naming the file; looking again says nothing more; a good file is in force at the next look."""
    path = tmp_path / "egress.toml"
    path.write_text(POLICY)
    said: list[str] = []
    live = LivePolicy(path, tmp_path, named=True, say=said.append)
    assert live.policy.judge(SECRET).rule == "no-secrets"
    BREAKAGES[breakage](path)
    assert live.look() is False
    assert live.policy.judge(SECRET).rule == "no-secrets" and live.policy.judge(PUBLIC).action == "allow"
    assert len(said) == 1 and KEEPING in said[0] and str(path) in said[0]
    assert live.look() is False and len(said) == 1
    _replace(path, POLICY + '[[rule]]\nname = "no-public"\naction = "deny"\npaths = ["/public"]\n')
    assert live.look() is True
    assert live.policy.judge(PUBLIC).rule == "no-public" and REREAD in said[-1]


def test_a_retired_hosts_list_that_disappears_keeps_its_hosts_retired(tmp_path: Path) -> None:
    """The retired hosts are part of the policy: their file gone or emptied keeps them retired; a
    list edited to name none (a comment) is a list of none."""
    path = tmp_path / "egress.toml"
    path.write_text(POLICY)
    retired = tmp_path / "refused_hosts.txt"
    retired.write_text("old.example\n")
    said: list[str] = []
    live = LivePolicy(path, tmp_path, say=said.append)
    old = Call("http", "api.old.example", 443, "GET", "/")
    assert live.policy.judge(old).rule == "retired-hosts"
    for breakage in (retired.unlink, lambda: _replace(retired, "")):
        breakage()
        assert live.look() is False and live.policy.judge(old).rule == "retired-hosts"
        _replace(retired, "old.example\n")
        assert live.look() is True
    _replace(retired, "# none retired any more\n")
    assert live.look() is True and live.policy.judge(old).action == "allow"
    assert sum(KEEPING in line for line in said) == 2


def test_a_named_policy_file_missing_or_empty_at_start_is_an_error(tmp_path: Path) -> None:
    """`--policy FILE` that does not exist or is empty is an error naming it; the default file may
    be absent (no policy until it appears, then it is in force)."""
    missing = tmp_path / "nope.toml"
    with pytest.raises(PolicyFileError, match="egress policy file not found"):
        LivePolicy(missing, tmp_path, named=True)
    missing.write_text("  \n")
    with pytest.raises(PolicyFileError, match="is empty"):
        LivePolicy(missing, tmp_path, named=True)
    default = tmp_path / "egress.toml"
    live = LivePolicy(default, tmp_path, say=lambda _: None)
    assert live.policy.empty
    default.write_text(POLICY)
    assert live.look() is True and live.policy.judge(SECRET).rule == "no-secrets"


@pytest.mark.parametrize("file", ["missing", "empty"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_proxy_refuses_to_start_on_a_missing_policy_file(workers: str, file: str, tmp_path: Path) -> None:
    """`flightlog proxy --policy FILE` with no FILE, or an empty one, exits non-zero with one line
    naming it, one worker or several, and never listens."""
    home = tmp_path / "home"
    if file == "empty":
        (tmp_path / "nope.toml").write_text("\n")
    env = {**os.environ, "FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / 'l.db'}"}
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "proxy", "--listen", "127.0.0.1:0", "--workers", workers,
         "--policy", str(tmp_path / "nope.toml")],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    said = {"missing": "no such file", "empty": "is empty"}[file]
    assert len(lines) == 1 and said in lines[0] and "nope.toml" in lines[0], done.stderr
    assert not (home / "proxy.json").exists()


@dataclass
class World:
    proxy: LiveProxy
    plain: Upstream
    policy: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fail-closed")
    policy = root / "egress.toml"
    policy.write_text(POLICY)
    with upstream() as plain:
        proxy = start_proxy(
            root / "home", f"sqlite:///{root / 'l.db'}", args=["--workers", "2", "--policy", str(policy)]
        )
        try:
            yield World(proxy, plain, policy)
        finally:
            proxy.stop()


def _statuses(w: World, path: str) -> set[int]:
    """Statuses of requests on fresh connections (the kernel spreads them over both workers)."""
    url = f"http://127.0.0.1:{w.plain.port}{path}"
    return {httpx.get(url, proxy=w.proxy.url, timeout=30).status_code for _ in range(8)}


def _lines(w: World, text: str) -> int:
    return sum(text in line for line in w.proxy.log().splitlines())


def _until(check: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Wait for the proxy to act (its log line is the cause a test waits for), up to a deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_real_proxy_still_refuses_after_the_policy_file_breaks(breakage: str, world: World) -> None:
    """Through a real proxy (two workers) and a real client: once the proxy said it keeps the last
    good policy (one line for the proxy), every worker still refuses `/secret`, which never reaches
    the upstream, and still serves `/fixed`; restoring the file is said once too."""
    keeping, reread = _lines(world, KEEPING), _lines(world, REREAD)
    assert _statuses(world, "/secret/before") == {403}
    BREAKAGES[breakage](world.policy)
    assert _until(lambda: _lines(world, KEEPING) > keeping), world.proxy.log()
    assert _statuses(world, f"/secret/{breakage.replace(' ', '-')}") == {403}
    assert _statuses(world, "/fixed") == {200}
    assert not [r for r in world.plain.received if r[1].startswith("/secret")]
    _replace(world.policy, POLICY)
    assert _until(lambda: _lines(world, REREAD) > reread), world.proxy.log()
    assert _lines(world, KEEPING) == keeping + 1 and _lines(world, REREAD) == reread + 1
    assert _statuses(world, "/secret/after") == {403}


def test_the_policy_in_force_is_said_once_for_the_proxy(world: World) -> None:
    """At start, the policy in force is said in one line for the proxy, not one per worker."""
    said = [x for x in world.proxy.log().splitlines() if f"egress policy {world.policy}:" in x]
    assert len(said) == 1 and "1 rules" in said[0], world.proxy.log()
