"""Reading what the proxy recorded, for assertions (waits for the writer's deferred commits)."""

from __future__ import annotations

import time

from sqlalchemy import text

from storage.events import StoredEvent
from storage.ledger import Ledger, open_ledger


def ledger_of(url: str, blobs_url: str) -> Ledger:
    return open_ledger(url, blobs_url, retry_seconds=0)


def events_where(ledger: Ledger, where: str, params: dict[str, object]) -> list[StoredEvent]:
    with ledger.engine.connect() as c:
        ids = [row[0] for row in c.execute(text(f"SELECT event_id FROM events WHERE {where}"), params)]
    return sorted(ledger.events(ids), key=lambda e: (e.kind != "http.request", e.at, e.event_id))


def wait_for(
    ledger: Ledger, where: str, params: dict[str, object], count: int, timeout: float = 30.0
) -> list[StoredEvent]:
    """The events matching `where`, once at least `count` of them are committed (or what there is after
    `timeout` seconds: long, as a loaded machine needs; a wait that ends early costs nothing)."""
    deadline = time.monotonic() + timeout
    while True:
        found = events_where(ledger, where, params)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)
