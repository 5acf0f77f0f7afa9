"""Shared fixtures: a fresh FLIGHTLOG_HOME, and a fresh PostgreSQL database per test.

PostgreSQL tests never skip: when the server is unreachable they fail with one clear line, because
CI must prove the PostgreSQL path (`.ci/run` starts the cluster first).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings

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
    """Every test has a FLIGHTLOG_HOME of its own unless it names one: a Ledger opened to write keeps
    its collectors' chain keys there (storage.chain.keys), never in the runner's ~/.flightlog."""
    if "FLIGHTLOG_HOME" not in os.environ:
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
