"""Faults: a restarted PostgreSQL, an unreachable S3, a full disk, a flipped bit."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.chain.verify import verify
from storage.errors import BlobStoreUnavailable, CorruptPayload, DiskFull
from storage.events import INLINE_MAX
from storage.ledger import Ledger, open_ledger
from tests.storage.factory import batch, event


def count(ledger: Ledger, sql: str) -> int:
    with ledger.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def restart_postgres_immediately() -> None:
    """`pg_ctlcluster ... restart -m immediate`: the server drops every connection without a goodbye."""
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "immediate"],
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.mark.serial  # the restart drops every other test's connections: `make test` runs it alone
def test_a_writer_survives_a_postgres_restart_and_every_batch_lands_once(pg_url: str, tmp_path: Path) -> None:
    """Appending through an immediate restart: reconnect, retry, and no batch is lost or doubled."""
    ledger = open_ledger(pg_url, (tmp_path / "blobs").as_uri(), retry_seconds=60)
    batches, per_batch = 40, 50
    errors: list[BaseException] = []
    started = threading.Event()

    def writer() -> None:
        try:
            for b in range(batches):
                events = [event(b * per_batch + i) for i in range(per_batch)]
                ledger.append(batch(events, position=b + 1))
                if b == 3:
                    started.set()
                time.sleep(0.02)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            started.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert started.wait(30)
    restart_postgres_immediately()
    thread.join(120)
    assert not thread.is_alive()
    assert errors == []
    assert count(ledger, "SELECT count(*) FROM events") == batches * per_batch
    assert count(ledger, "SELECT count(DISTINCT event_id) FROM events") == batches * per_batch
    assert count(ledger, "SELECT count(*) FROM batches") == batches
    assert ledger.position("test") == batches
    ledger.close()


def test_s3_down_inline_batches_commit_large_ones_wait(tmp_path: Path, s3_endpoint: str) -> None:
    """With S3 unreachable, an all-inline batch commits; a large payload's batch fails whole and,
    retried when S3 is back, commits; no row ever points at an absent object."""
    ledger = open_ledger(
        f"sqlite:///{tmp_path / 'l.db'}", "s3://ledger/p?endpoint=http://127.0.0.1:9", retry_seconds=0.5
    )
    small = batch([event(0, payload=b"small"), event(1, payload=b"also small")], position=1)
    assert ledger.append(small).new == 2
    large = batch([event(2, payload=os.urandom(INLINE_MAX + 10)), event(3)], position=2)
    with pytest.raises(BlobStoreUnavailable):
        ledger.append(large)
    assert count(ledger, "SELECT count(*) FROM events") == 2
    assert count(ledger, "SELECT count(*) FROM blobs WHERE location = 'store'") == 0
    # S3 comes back (a real endpoint this time): the same batch is retried and lands whole.
    back = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", f"s3://ledger/p?endpoint={s3_endpoint}")
    assert back.append(large).new == 2
    sha = back.event("ev-000002").payload_sha256  # type: ignore[union-attr]
    assert back.payload(sha) == large.events[0].payload
    assert verify(back).ok


@contextlib.contextmanager
def tiny_disk(path: Path, size: str) -> Iterator[Path]:
    """A real full disk: a small tmpfs (needs root, as CI has); else SQLite's page limit."""
    path.mkdir()
    mounted = os.geteuid() == 0 and (
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode == 0
    )
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_is_one_clear_error_and_earlier_batches_survive(tmp_path: Path) -> None:
    """SQLite on a full disk: DiskFull naming the problem, the batch rolled back, the rest intact."""
    with tiny_disk(tmp_path / "disk", "1m") as disk:
        ledger = open_ledger(f"sqlite:///{disk / 'l.db'}", (tmp_path / "blobs").as_uri())
        if os.geteuid() != 0:
            with ledger.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA max_page_count = 200")
        ledger.append(batch([event(i, payload=b"%d" % i) for i in range(10)], position=1))
        with pytest.raises(DiskFull) as info:
            for b in range(2, 200):
                payloads = [os.urandom(30_000) for _ in range(10)]
                ledger.append(batch([event(b * 10 + i, payload=p) for i, p in enumerate(payloads)], b))
        assert "full" in str(info.value)
        assert ledger.event("ev-000009") is not None
        assert count(ledger, "SELECT count(*) FROM events") % 10 == 0, "no batch half-written"
        with ledger.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
        ledger.close()


def flip_bit(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1 :]


def test_a_flipped_bit_in_the_blob_store_is_reported_by_verify_and_the_read_path(tmp_path: Path) -> None:
    """The stored object no longer matches its address: verify names it, payload() refuses it."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    big = os.urandom(INLINE_MAX * 2)
    ledger.append(batch([event(0, payload=big), event(1, payload=b"fine")]))
    sha = ledger.event("ev-000000").payload_sha256  # type: ignore[union-attr]
    path = next((tmp_path / "blobs").glob(f"*/{sha}.zst"))
    path.write_bytes(flip_bit(path.read_bytes(), len(path.read_bytes()) // 2))
    with pytest.raises(CorruptPayload):
        ledger.payload(sha)
    report = verify(ledger)
    assert report.corrupted == [sha] and not report.ok
    path.unlink()
    assert verify(ledger).missing == [sha]


def test_a_flipped_bit_in_an_inline_blob_is_reported_too(ledger_url: str, tmp_path: Path) -> None:
    """Tampering that bypasses the triggers (as a superuser could) is caught by the hash."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    ledger.append(batch([event(0, payload=b'{"answer": 42}' * 20)]))
    sha = ledger.event("ev-000000").payload_sha256  # type: ignore[union-attr]
    with ledger.engine.begin() as conn:
        frame = bytes(conn.execute(text("SELECT data FROM blobs")).scalar_one())
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        else:
            conn.exec_driver_sql("DROP TRIGGER blobs_no_update")
        conn.execute(text("UPDATE blobs SET data = :d"), {"d": flip_bit(frame, len(frame) // 2)})
    with pytest.raises(CorruptPayload):
        ledger.payload(sha)
    assert verify(ledger).corrupted == [sha]
    ledger.close()


def test_an_orphaned_object_is_reported(tmp_path: Path) -> None:
    """An object in the store that no blob row names (an upload whose batch never committed)."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    ledger.blobs.put("ab" * 32, b"whatever")
    assert verify(ledger).orphaned == ["ab" * 32]
