"""The test run touches nothing of the user's and leaves nothing running (tests/conftest.py).

The suite's own fixtures and helpers (a recording proxy and a request through it, the Ledger it wrote,
plain mitmdump, `flightlog` commands, a PostgreSQL schema) run here with HOME at an empty folder: it
stays empty, so none of them writes into a home. And a run whose test leaves a process behind (a child,
or a grandchild reparented away from it) fails and names it, and the process is ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx
import pytest

from tests.capture.ledger_view import ledger_of, wait_for
from tests.conftest import REAL_HOME
from tests.support import processes
from tests.support.differential import plain_mitmdump
from tests.support.proxy import live_proxy
from tests.support.upstream import self_signed, upstream

ROOT = Path(__file__).resolve().parents[1]


def test_the_run_has_a_home_of_its_own() -> None:
    """HOME, the XDG folders, npm's and pip's caches and FLIGHTLOG_HOME point away from the user's home."""
    real = Path(os.environ[REAL_HOME])
    for name in (
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "npm_config_cache",
        "PIP_CACHE_DIR",
        "FLIGHTLOG_HOME",
    ):
        assert not Path(os.environ[name]).is_relative_to(real) or real == Path("/"), (name, os.environ[name])


def test_the_fixtures_write_nothing_into_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """With HOME at an empty folder, a proxy records a request, its Ledger is read, plain mitmdump
    starts and `flightlog env` and `flightlog ledger state` run: the folder is still empty."""
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    session = uuid.uuid4().hex
    with upstream() as up, live_proxy(tmp_path / "fl", f"sqlite:///{tmp_path / 'l.db'}") as proxy:
        got = httpx.get(
            f"{up.base}/fixed", proxy=proxy.url, headers={"X-Flightlog-Session": session}, timeout=30
        )
        assert got.status_code == 200
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        assert len(wait_for(ledger, "session = :s", {"s": session}, 2)) == 2
        ledger.close()
        env = {**os.environ, "FLIGHTLOG_HOME": str(tmp_path / "fl")}
        for args in (("env",), ("ledger", "state")):
            done = subprocess.run(
                [sys.executable, "-m", "flightlog", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
    cert, _ = self_signed(tmp_path)
    with plain_mitmdump(tmp_path / "mitmdump", cert) as port:
        assert port > 0
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []


LEAVER = """
import subprocess


def test_leaves_a_child() -> None:
    subprocess.Popen(["sleep", "{seconds}"])


def test_leaves_a_grandchild() -> None:
    subprocess.run(["sh", "-c", "sleep {seconds} >/dev/null 2>&1 &"], check=True)
"""


@pytest.mark.parametrize("workers", [("-p", "no:xdist"), ("-n", "2")], ids=["one-process", "xdist"])
def test_a_process_left_running_fails_the_run_and_is_ended(tmp_path: Path, workers: tuple[str, str]) -> None:
    """A run (with this suite's conftest, alone or on xdist workers) whose tests leave a `sleep` behind,
    one as their child and one reparented away: the run fails naming both, and neither is running
    afterwards."""
    seconds = f"{300 + uuid.uuid4().int % 1000}"  # a command line only these sleeps have
    (tmp_path / "test_leaver.py").write_text(textwrap.dedent(LEAVER.replace("{seconds}", seconds)))
    env = {k: v for k, v in os.environ.items() if k != processes.MARKER and not k.startswith("PYTEST_")}
    env["FLIGHTLOG_TEST_HOME_WATCH"] = "0"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *workers, "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_leaver.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "2 passed" in said, said
    assert said.count("a process the tests started is still running") == 2, said
    assert said.count(f"sleep {seconds}") == 2, said
    left = [p for p in processes.descendants(1) if processes.command(p) == f"sleep {seconds}"]
    assert left == [], left


def test_the_home_watch_sees_a_file_appear_change_or_go(tmp_path: Path) -> None:
    """The home watch's snapshot of a home's watched folders differs, path by path, after a file under
    them appears, changes or goes, and not after a change elsewhere in the home."""
    from tests.conftest import WATCHED, _snapshot, changed

    home = tmp_path / "home"
    for name in WATCHED:
        (home / name).mkdir(parents=True)
    (home / ".npm" / "kept").write_text("a")
    (home / ".flightlog" / "gone").write_text("b")
    before = _snapshot(home)
    (home / ".config").mkdir()
    (home / ".config" / "elsewhere").write_text("not watched")
    assert changed(before, _snapshot(home)) == []
    (home / ".npm" / "kept").write_text("ab")
    (home / ".flightlog" / "gone").unlink()
    (home / ".cache" / "flightlog" / "new").write_text("c")
    got = changed(before, _snapshot(home))  # the files, and their folders when the clock's tick moved
    files = {str(home / p) for p in (".npm/kept", ".flightlog/gone", ".cache/flightlog/new")}
    assert files <= set(got) <= files | {str(home / ".flightlog"), str(home / ".cache" / "flightlog")}, got
