"""The pytest plugin: a test's traffic recorded the first time, replayed hermetically afterwards.

A test asks for the `flightlog_recording` fixture (and may name its recording with
`@pytest.mark.flightlog("name")`). The first run records everything the test sends through the proxy
variables into a small Ledger file beside the test (`flightlog_recordings/NAME.ledger`, blobs over
256 KiB in `NAME.blobs/`), through a real recording proxy; every later run serves that file back
through a hermetic serve-replay proxy, and a request it has no answer for fails the test with the one
line naming the closest recorded request. `--flightlog-record` records again.

The variables are set in `os.environ` for the test (in-process clients built during the test read
them) and given as `flightlog_recording.env` for a subprocess agent. Registered through the
`pytest11` entry point, so installing flightlog is enough.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from flightlog.replay_run import ReplayServer

RECORDINGS = "flightlog_recordings"
_HANDLE = pytest.StashKey["Recording"]()


@dataclass
class Recording:
    """What a test gets: the mode, the recording's file, the variables that route through it."""

    name: str
    mode: str  # "record" or "replay"
    path: Path
    env: dict[str, str] = field(default_factory=dict)
    server: ReplayServer | None = None

    @property
    def ledger_url(self) -> str:
        return f"sqlite:///{self.path}"

    @property
    def blobs_url(self) -> str:
        return self.path.with_suffix(".blobs").as_uri()

    def misses(self) -> list[str]:
        """The miss lines so far (replay mode); each names the closest recorded request."""
        if self.server is None:
            return []
        return [o.miss or "" for o in self.server.report.misses]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("flightlog")
    group.addoption(
        "--flightlog-record",
        action="store_true",
        default=False,
        help="Record the flightlog recordings of the tests run again (replacing them).",
    )
    group.addoption(
        "--flightlog-match",
        default="exact,normalized,sequence",
        help="Matching strategies for replay (exact, normalized, url; sequence).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "flightlog(name): the flightlog recording this test records once and replays after"
    )


def recording_name(item: pytest.Item) -> str:
    """The marker's name, else `module.test` (parameters kept), made safe for a file name."""
    marker = item.get_closest_marker("flightlog")
    name = str(marker.args[0]) if marker is not None and marker.args else f"{item.path.stem}.{item.name}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "recording"


@pytest.fixture
def flightlog_recording(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Recording]:
    """Record this test's traffic the first time (or with --flightlog-record), replay it afterwards."""
    # deferred: every pytest run loads this plugin; only tests taking the fixture need these
    from flightlog.replay_run import Plan, recording_proxy, serving
    from flightlog.settings import load_settings
    from readback.matching import load_rules, parse_strategies
    from recording.identity import Identity

    item = request.node
    name = recording_name(item)
    path = item.path.parent / RECORDINGS / f"{name}.ledger"
    refresh = bool(request.config.getoption("--flightlog-record"))
    if refresh:
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)
        shutil.rmtree(path.with_suffix(".blobs"), ignore_errors=True)
    confdir = load_settings().confdir
    handle = Recording(name, "replay" if path.exists() else "record", path)
    with contextlib.ExitStack() as stack:
        if handle.mode == "record":
            path.parent.mkdir(parents=True, exist_ok=True)
            recorder = stack.enter_context(recording_proxy(handle.ledger_url, handle.blobs_url, confdir))
            handle.env = recorder.env(Identity(session=name))
        else:
            strategies = parse_strategies(str(request.config.getoption("--flightlog-match")))
            plan = Plan(handle.ledger_url, handle.blobs_url, strategies=strategies, rules=load_rules(None))
            handle.server = stack.enter_context(serving(plan, confdir))
            handle.env = handle.server.env(Identity(session=name))
        for variable, value in handle.env.items():
            monkeypatch.setenv(variable, value)
        item.stash[_HANDLE] = handle
        yield handle


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A replayed test with a miss fails, with the miss lines, whatever the test itself concluded."""
    try:
        return (yield)
    finally:
        handle = item.stash.get(_HANDLE, None)
        misses = handle.misses() if handle is not None else []
        if misses:
            assert handle is not None
            pytest.fail(
                f"flightlog: {len(misses)} request(s) not in recording {handle.path.name}"
                " (run with --flightlog-record to record again):\n" + "\n".join(misses),
                pytrace=False,
            )
