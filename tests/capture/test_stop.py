"""A stop loses nothing answered: SIGTERM under load, with two workers, and every exchange a client
got an answer for is in the Ledger (requests the stopping proxy refused are recorded as refused)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from tests.capture.ledger_view import events_where, ledger_of
from tests.capture.test_kill_writer import load, recorded_ids
from tests.support.proxy import start_proxy
from tests.support.upstream import Upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)


def test_sigterm_under_load_loses_nothing_answered(tmp_path: Path, http_upstream: Upstream) -> None:
    """8 clients for 4 s through 2 workers, SIGTERM to the proxy once more than 50 exchanges were
    answered (under load, not after a fixed time a loaded machine may not reach it in): every exchange
    answered 200 is recorded exactly once; the proxy stops within its drain."""
    proxy = start_proxy(tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}", args=["--workers", "2"])
    answered: list[str] = []
    clients = threading.Thread(target=load, args=(proxy.url, http_upstream.base, 8, 4.0, answered))
    clients.start()
    loaded = time.monotonic() + 3.5
    while len(answered) <= 50 and time.monotonic() < loaded:
        time.sleep(0.02)
    proxy.proc.send_signal(signal.SIGTERM)
    clients.join()
    proxy.proc.wait(60)  # it stops by itself (a proxy that hung on would fail here)
    recorded = recorded_ids(proxy.ledger_url, proxy.blobs_url)
    missing = [rid for rid in answered if rid not in recorded]
    doubled = [rid for rid, n in recorded.items() if n > 1]
    assert len(answered) > 50, len(answered)
    assert missing == [] and doubled == [], (len(answered), len(missing), len(doubled), proxy.log()[-2000:])
    ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
    refused = events_where(ledger, "kind = 'http.response' AND error LIKE 'The proxy was stopping%'", {})
    ledger.close()
    assert all(e.status is None and e.client_bytes is None for e in refused), refused
