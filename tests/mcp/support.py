"""Helpers for the MCP tests: the `mcp-record` command line, reading what it recorded, the SDK client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text

from storage.events import StoredEvent
from storage.ledger import Ledger

HERE = Path(__file__).resolve().parent
SDK_SERVER = [sys.executable, str(HERE / "sdk_server.py")]
TAP = [sys.executable, str(HERE / "tap.py")]
RAW = [sys.executable, str(HERE / "raw_server.py")]
FLIGHTLOG = str(Path(sys.executable).with_name("flightlog"))


@contextmanager
def sdk_server(mode: str, timeout: float = 60.0) -> Iterator[int]:
    """The SDK server over HTTP (`--http`, `--http-json`, `--sse`) on a port of its own, once it
    listens (it imports the SDK first: seconds on a loaded machine, and a proxy in reverse mode
    closes a client whose upstream refuses); stopped at the end."""
    from tests.support.ports import free_block
    from tests.support.processes import stop_group

    port = free_block(1)
    proc = subprocess.Popen([*SDK_SERVER, mode, str(port)], start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the SDK server ({mode}) did not listen on {port}") from None
                time.sleep(0.05)
        yield port
    finally:
        stop_group(proc)


def recorded(command: Sequence[str], *options: str) -> list[str]:
    """`flightlog mcp-record [options] -- command`."""
    return [FLIGHTLOG, "mcp-record", *options, "--", *command]


def session_events(ledger: Ledger, timeout: float = 60.0) -> dict[str, list[StoredEvent]]:
    """Every stdio session's events by session id, once each session's `mcp.exit` is committed.

    The wrapper leaves its writer process (niced, in its own session) to finish committing, so on a
    loaded machine the end can come seconds after the client is done: wait for it, and say so plainly
    if it never comes rather than hand back a session cut short."""
    deadline = time.monotonic() + timeout
    while True:
        with ledger.engine.connect() as c:
            ids = [r[0] for r in c.execute(text("SELECT event_id FROM events WHERE event_id LIKE 'mcp:%'"))]
            ends = c.execute(text("SELECT count(*) FROM events WHERE kind = 'mcp.exit'")).scalar() or 0
            starts = c.execute(text("SELECT count(*) FROM events WHERE kind = 'mcp.start'")).scalar() or 0
        if starts and ends >= starts:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{ends} of {starts} sessions' mcp.exit committed after {timeout:.0f} s")
        time.sleep(0.1)
    out: dict[str, list[StoredEvent]] = {}
    for event in ledger.events(ids):
        out.setdefault(event.event_id.split(":")[1], []).append(event)
    for events in out.values():
        events.sort(key=lambda e: e.seq)
    return out


def lines_of(events: Sequence[StoredEvent], side: str) -> list[StoredEvent]:
    """One side's line events (`c` client, `s` server) in the order they were sent."""
    found = [e for e in events if e.event_id.split(":")[2] == side]
    return sorted(found, key=lambda e: int(e.event_id.rsplit(":", 1)[1]))
