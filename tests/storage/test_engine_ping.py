"""PostgreSQL connections are pinged at checkout only after being idle (storage.engine.ping_when_idle).

A busy writer's connection, used 50 ms before, is handed out without a round trip; one idle longer
is pinged first, and a dead one is replaced before anyone uses it. A server that went away within
the idle window is met by the first statement: that connection is invalidated and the next checkout
works, and a Ledger append retries through it (the restart test in test_faults drives that end to
end).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from storage.engine import make_engine, ping_when_idle
from storage.ledger import open_ledger
from tests.storage.factory import batch, event
from tests.support.postgres import end_backend

IDLE = 0.3


def _pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _kill(engine: Engine) -> None:
    """Terminate the server backend behind the pool's one connection, as a restart would."""
    admin_url = engine.url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    end_backend(admin_url, _pid(engine))


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    made = create_engine(pg_url, pool_size=1, max_overflow=0)
    ping_when_idle(made, IDLE)
    yield made
    made.dispose()


def test_a_connection_used_within_the_idle_window_is_handed_out_without_a_ping(engine: Engine) -> None:
    """Back-to-back checkouts reuse the connection with no ping first; one idle past the window is
    pinged once."""
    first = _pid(engine)
    pings: list[int] = []
    real = engine.dialect.do_ping

    def counted(dbapi_conn: Any) -> bool:
        pings.append(1)
        return real(dbapi_conn)

    engine.dialect.do_ping = counted  # type: ignore[assignment]  # counts the real pings
    for _ in range(5):
        assert _pid(engine) == first
    assert pings == []
    time.sleep(IDLE + 0.1)
    assert _pid(engine) == first
    assert pings == [1], "a connection idle past the window is pinged once before use"


def test_an_idle_dead_connection_is_replaced_before_use(engine: Engine) -> None:
    """The server dropped the connection while it sat idle: the checkout's ping finds it dead and
    the pool connects afresh, so the caller's query succeeds on a new backend."""
    first = _pid(engine)
    _kill(engine)
    time.sleep(IDLE + 0.1)
    assert _pid(engine) != first


def test_a_connection_dropped_within_the_window_fails_once_then_the_pool_recovers(engine: Engine) -> None:
    """Within the idle window no ping guards the checkout: the first statement meets the dead
    connection as a disconnect (which the Ledger's writer retries), and the very next checkout
    gets a new connection."""
    first = _pid(engine)
    _kill(engine)
    with pytest.raises(OperationalError) as raised:
        _pid(engine)
    assert raised.value.connection_invalidated
    assert _pid(engine) != first


def test_the_ledger_engine_pings_only_after_a_second_idle(pg_url: str) -> None:
    """`make_engine` wires the idle ping for PostgreSQL: a dead connection idle past `PING_IDLE` is
    replaced without an error."""
    engine = make_engine(pg_url)
    try:
        first = _pid(engine)
        _kill(engine)
        time.sleep(1.1)
        assert _pid(engine) != first
    finally:
        engine.dispose()


def test_an_append_on_a_connection_lost_within_the_window_retries_once_and_lands(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer's connection dies between two commits 50 ms apart (no ping guards it): the
    statement that meets it invalidates it (storage.chain.links.query), the Ledger says so in one warning
    line naming the server's reason and retries on a new connection, and the batch lands whole."""
    ledger = open_ledger(pg_url, (tmp_path / "blobs").as_uri(), retry_seconds=10)
    try:
        assert ledger.append(batch([event(i) for i in range(3)], position=1)).new == 3
        _kill(ledger.engine)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert ledger.append(batch([event(i) for i in range(3, 6)], position=2)).new == 3
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "retrying" in warnings[0].getMessage()
        # the server's own reason, not the rollback's "the connection is lost" that hid it
        assert "terminating connection due to administrator command" in warnings[0].getMessage()
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert ledger.position("test") == 2
    finally:
        ledger.close()
