"""Shared fixtures: a fresh FLIGHTLOG_HOME, and a fresh PostgreSQL database per test; the run kept
away from the user's own files and processes.

PostgreSQL tests never skip: when the server is unreachable they fail with one clear line, because
CI must prove the PostgreSQL path (`.ci/run` starts the cluster first).

Before any test module is imported, the run gets a scratch folder of its own (HOME, XDG config, data
and state under it) and one shared, named cache for what is slow to fetch again (npm's and pip's
caches, Phoenix's environment): `.test-cache/` in the checkout, or FLIGHTLOG_TEST_CACHE; `make clean`
removes it. xdist workers inherit the environment. The run fails when anything of the user's real
`~/.flightlog`, `~/.mitmproxy`, `~/.npm` or `~/.cache/flightlog` changed during it (the home watch;
FLIGHTLOG_TEST_HOME_WATCH=0 turns it off, for a machine where other work writes there), or when a
process it started is still running at its end (tests/support/processes.py; such leftovers are then
killed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psycopg
import pytest
from hypothesis import settings

from tests.support import processes

ROOT = Path(__file__).resolve().parents[1]
WATCHED = (".flightlog", ".mitmproxy", ".npm", ".cache/flightlog")
"""The user's own folders the test run must leave as they were (relative to the real HOME)."""
REAL_HOME = "FLIGHTLOG_TEST_REAL_HOME"


def _isolate() -> None:
    """HOME, XDG folders, FLIGHTLOG_HOME and the package managers' caches for this run (once, in the
    first process: xdist workers and every child inherit them)."""
    if os.environ.get(processes.MARKER):
        return
    scratch = Path(tempfile.mkdtemp(prefix="flightlog-tests-"))
    cache = Path(os.environ.get("FLIGHTLOG_TEST_CACHE") or ROOT / ".test-cache")
    home = scratch / "home"
    for folder in (home, cache):
        folder.mkdir(parents=True, exist_ok=True)
    os.environ.update(
        {
            REAL_HOME: os.environ.get("HOME", str(Path.home())),
            processes.MARKER: str(scratch),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(cache / "xdg"),
            "npm_config_cache": str(cache / "npm"),
            "PIP_CACHE_DIR": str(cache / "pip"),
            "FLIGHTLOG_HOME": str(scratch / "flightlog-home"),
        }
    )


_isolate()
_RUN_HOME: Final = {"FLIGHTLOG_HOME": os.environ["FLIGHTLOG_HOME"]}
"""The run's FLIGHTLOG_HOME as `_isolate` set it (a test's own replaces it; a fixture's is kept)."""


def _snapshot(real_home: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file and folder under the watched folders of the real HOME."""
    seen: dict[str, tuple[int, int]] = {}
    for name in WATCHED:
        top = real_home / name
        if not top.exists():
            continue
        for folder, _dirs, files in os.walk(top):
            for entry in (folder, *(os.path.join(folder, f) for f in files)):
                try:
                    st = os.lstat(entry)
                except OSError:
                    continue
                seen[entry] = (st.st_size, st.st_mtime_ns)
    return seen


def _watching(config: pytest.Config) -> bool:
    """The first process of the run (not an xdist worker), with the home watch on."""
    return not hasattr(config, "workerinput") and os.environ.get("FLIGHTLOG_TEST_HOME_WATCH", "1") != "0"


def pytest_sessionstart(session: pytest.Session) -> None:
    if _watching(session.config):
        session.config.stash[_BEFORE] = _snapshot(Path(os.environ[REAL_HOME]))


_BEFORE = pytest.StashKey[dict[str, tuple[int, int]]]()


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The paths that appeared, went or changed between two snapshots, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


_FROM_WORKERS: list[str] = []
"""What the xdist workers found at their end (sent in their `workeroutput`)."""


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown under `-p no:xdist`
def pytest_testnodedown(node: object, error: object) -> None:
    """An xdist worker is done: keep what it found left running."""
    _FROM_WORKERS.extend(getattr(node, "workeroutput", {}).get("flightlog_problems", []))


def _left_running(config: pytest.Config) -> list[str]:
    """The processes this one started that still run (in each worker, and in a run without xdist), and
    in the first process, those of the run that got away from their parent; each is then killed."""
    me = os.getpid()
    controller = config.pluginmanager.get_plugin("dsession") is not None  # its children are the workers
    mine = (
        []
        if controller
        else processes.settle(lambda: [p for p in processes.descendants(me) if not _exempt(p)])
    )
    away: list[int] = []
    if not hasattr(config, "workerinput"):
        run = os.environ[processes.MARKER]
        away = processes.settle(
            lambda: [
                p for p in processes.orphans(run) if not _exempt(p) and p not in processes.descendants(me)
            ]
        )
    said = [
        f"a process the tests started is still running: {p} {processes.command(p)[:200]}" for p in mine + away
    ]
    processes.kill([q for p in away for q in (p, *processes.descendants(p))] + mine)
    return said


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run on what it left behind: its processes, and changes in the user's own folders."""
    problems = _left_running(session.config)
    if hasattr(session.config, "workerinput"):  # the first process reports it
        session.config.workeroutput["flightlog_problems"] = problems  # type: ignore[attr-defined]
        return
    problems = _FROM_WORKERS + problems
    if session.config.stash.get(_BEFORE, None) is not None:
        moved = changed(session.config.stash[_BEFORE], _snapshot(Path(os.environ[REAL_HOME])))
        problems += [f"the tests changed the user's own {path}" for path in moved[:20]]
        if len(moved) > 20:
            problems.append(f"... and {len(moved) - 20} more paths in the user's home")
    shutil.rmtree(os.environ[processes.MARKER], ignore_errors=True)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in problems:
            if reporter is not None:
                reporter.write_line(f"flightlog tests: {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _exempt(pid: int) -> bool:
    """PostgreSQL's server, restarted by the `serial` tests on purpose, runs on after them."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "pg_ctl")
    except OSError:
        return True


# No per-example deadline: on a loaded machine (parallel workers, other jobs on the cores) one example
# of a property test can take 300 ms where it takes 20 ms alone, and Hypothesis then reports the test
# as flaky. The properties are about what the code does, not how fast it does it.
settings.register_profile("flightlog", deadline=None)
settings.load_profile("flightlog")

PG_ADMIN = os.environ.get("FLIGHTLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` (a module's `pytestmark`) first, the order otherwise kept: the xdist workers
    start the long files at once, instead of one worker running them alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _pg_server() -> str:
    """The admin URL's server part, for building per-test database URLs."""
    return PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "")


@pytest.fixture(autouse=True)
def _own_flightlog_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test has a FLIGHTLOG_HOME of its own (whatever the runner's environment named), unless a
    fixture of a wider scope named one for its tests (a module's shared proxy and its home): a
    Ledger opened to write keeps its collectors' chain keys there (storage.chain.keys), never in the
    runner's ~/.flightlog."""
    if os.environ.get("FLIGHTLOG_HOME") != _RUN_HOME.get("FLIGHTLOG_HOME"):
        return
    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path_factory.mktemp("flightlog-home")))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh FLIGHTLOG_HOME with nothing else from the environment leaking in."""
    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path / "home"))
    for name in ("FLIGHTLOG_LEDGER", "FLIGHTLOG_BLOBS", "FLIGHTLOG_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty PostgreSQL schema (as a SQLAlchemy URL whose search_path is that schema),
    dropped after the test. A schema costs milliseconds where a database costs a second."""
    name = f"fl_{uuid.uuid4().hex[:12]}"
    admin = None
    for attempt in range(40):  # another test may be restarting the server on purpose
        try:
            admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5)
            break
        except psycopg.OperationalError as e:
            if attempt == 39:
                pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN}: {e}".splitlines()[0])
            time.sleep(0.5)
    assert admin is not None
    with admin:
        admin.execute(f'CREATE SCHEMA "{name}"')
    database = PG_ADMIN.rsplit("/", 1)[1]
    yield f"postgresql+psycopg://{_pg_server()}/{database}?options=-csearch_path%3D{name}"
    for attempt in range(20):  # a test may have just restarted the server
        try:
            with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as admin:
                admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            break
        except psycopg.OperationalError:
            if attempt == 19:
                raise
            time.sleep(0.5)


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on the embedded SQLite ledger and on a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """A real S3 HTTP endpoint (moto's server mode) with an empty bucket `ledger`."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="ledger")
    yield endpoint
    server.stop()
