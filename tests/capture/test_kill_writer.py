"""`kill -9` of the writer process under load loses nothing that was answered: the proxy keeps each
frame until the writer acknowledges it and hands the rest to the restarted writer, whose re-delivery
is idempotent (the same event ids), so no exchange is missing and none is doubled."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.capture.ledger_view import ledger_of
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)


def writer_pid(proxy_pid: int) -> int | None:
    """The proxy's writer process (its child named flightlog-writer), by parent id."""
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(proxy_pid)], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        pid, _, name = line.strip().partition(" ")
        if name.strip().startswith("flightlog-write"):
            return int(pid)
    return None


def load(proxy_url: str, base: str, clients: int, seconds: float, answered: list[str], tag: str = "") -> None:
    """`clients` threads sending GETs with unique ids for `seconds`; ids answered 200 are kept.
    `tag` starts every id, so runs recording into one Ledger never count each other's exchanges.

    The threads share one TLS context: each httpx client otherwise loads the CA bundle itself, and 20
    of them doing so at once (OpenSSL 3's certificate store locks) held every thread for seconds."""
    stop = time.monotonic() + seconds
    tls = ssl.create_default_context()

    def one(n: int) -> None:
        with httpx.Client(proxy=proxy_url, timeout=10, verify=tls) as client:
            i = 0
            while time.monotonic() < stop:
                rid = f"{tag}c{n}-{i}"
                i += 1
                try:
                    if client.get(f"{base}/fixed?rid={rid}").status_code == 200:
                        answered.append(rid)
                except httpx.HTTPError:
                    pass

    threads = [threading.Thread(target=one, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def recorded_ids(ledger_url: str, blobs_url: str) -> Counter[str]:
    """How many answer events each request id has in the Ledger."""
    from sqlalchemy import text

    ledger = ledger_of(ledger_url, blobs_url)
    with ledger.engine.connect() as c:
        urls = [r[0] for r in c.execute(text("SELECT url FROM events WHERE kind = 'http.response'"))]
    ledger.close()
    return Counter(u.split("rid=", 1)[1] for u in urls if "rid=" in u)


def test_kill_9_of_the_writer_under_load_loses_nothing_answered(
    ledger_url: str, tmp_path: Path, http_upstream: Upstream
) -> None:
    """4 clients for 3 s; the writer is killed (SIGKILL) after 1 s and restarted by the proxy:
    every answered exchange is recorded exactly once, on SQLite and PostgreSQL."""
    answered: list[str] = []
    with live_proxy(tmp_path / "home", ledger_url, blobs_url=(tmp_path / "blobs").as_uri()) as proxy:
        worker = threading.Thread(target=load, args=(proxy.url, http_upstream.base, 4, 3.0, answered))
        worker.start()
        time.sleep(1.0)
        pid = writer_pid(proxy.proc.pid)
        assert pid is not None, "the writer process runs"
        os.kill(pid, signal.SIGKILL)
        worker.join()
        deadline = time.monotonic() + 20
        while writer_pid(proxy.proc.pid) in (None, pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    log = proxy.log()
    assert "restarting it now" in log, log  # a first death: no wait while answers go out unprotected
    recorded = recorded_ids(ledger_url, proxy.blobs_url)
    missing = [rid for rid in answered if rid not in recorded]
    doubled = [rid for rid, n in recorded.items() if n > 1]
    assert len(answered) > 50
    assert missing == [] and doubled == [], (len(answered), len(missing), len(doubled), log[-2000:])
