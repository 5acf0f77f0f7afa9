"""A SQLite Ledger is readable where people look: plain `sqlite3` with flightlog's SQL functions, and a
real Datasette server with flightlog's plugin, show heads and bodies as text (payloads verified)."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from storage.blobstore import open_blob_store
from storage.events import INLINE_MAX
from storage.ledger import open_ledger
from storage.sql_functions import READABLE_EVENTS, SHOWN_MAX, readable_events_shown, register
from tests.storage.factory import batch, event

TEXT = b'{"messages": [{"role": "user", "content": "hello ledger"}]}'
BINARY = b"\x89PNG\r\n\x1a\n\x00\xff"
LARGE = b"line of a large answer\n" * (INLINE_MAX // 23 + 10)


@pytest.fixture
def ledger_db(tmp_path: Path) -> Path:
    """A ledger.db with a text body, a binary body and one large enough for the blob folder."""
    home = tmp_path / "home"
    home.mkdir()
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    ledger.append(batch([event(0, TEXT), event(1, BINARY), event(2, LARGE), event(3, None)]))
    ledger.close()
    return home / "ledger.db"


def _bodies(conn: sqlite3.Connection) -> dict[str, str | None]:
    return {row[0]: row[1] for row in conn.execute(f"SELECT event_id, body FROM ({READABLE_EVENTS})")}


def test_sqlite3_reads_bodies_and_heads_as_text(ledger_db: Path) -> None:
    """With `register`, a plain sqlite3 connection decodes inline and blob-folder payloads; binary is NULL."""
    conn = sqlite3.connect(ledger_db)
    register(conn, open_blob_store((ledger_db.parent / "blobs").as_uri()))
    bodies = _bodies(conn)
    assert bodies["ev-000000"] == TEXT.decode()
    assert bodies["ev-000001"] is None
    assert bodies["ev-000002"] == LARGE.decode()
    assert bodies["ev-000003"] is None
    head = conn.execute("SELECT flightlog_head(head) FROM events WHERE event_id = 'ev-000000'").fetchone()[0]
    assert head.startswith("POST /v1/things HTTP/1.1\r\nHost: api.example.com")


def test_a_forged_inline_payload_raises_instead_of_reading_wrong_bytes(ledger_db: Path) -> None:
    """A frame that does not hash to its address fails the query: wrong bytes are never shown."""
    import zstandard

    conn = sqlite3.connect(ledger_db)
    register(conn)
    sha = conn.execute("SELECT payload_sha256 FROM events WHERE event_id = 'ev-000000'").fetchone()[0]
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(b"forged")
    with pytest.raises(sqlite3.OperationalError, match="user-defined function raised exception"):
        conn.execute("SELECT flightlog_payload(?, ?)", (frame, sha)).fetchone()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def datasette_serving(ledger_db: Path) -> Iterator[str]:
    """A real `datasette serve ledger.db` on a free port until the block ends; its base URL."""
    port = _free_port()
    datasette = Path(sys.executable).parent / "datasette"
    env = {k: v for k, v in os.environ.items() if k != "FLIGHTLOG_BLOBS"}
    proc = subprocess.Popen(
        [str(datasette), "serve", str(ledger_db), "--port", str(port), "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/-/versions.json", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError(proc.stderr.read().decode() if proc.stderr else "") from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_datasette_shows_heads_and_bodies(ledger_db: Path) -> None:
    """`datasette ledger.db` (the real server, plugin found through its entry point) serves the canned
    query with bodies as text and renders the events table's heads as text."""
    with datasette_serving(ledger_db) as base:
        rows = httpx.get(f"{base}/ledger/readable_events.json?_shape=array", timeout=10).json()
        bodies = {row["event_id"]: row["body"] for row in rows}
        assert bodies["ev-000000"] == TEXT.decode()
        assert bodies["ev-000002"] == LARGE.decode()
        assert bodies["ev-000001"] is None
        page = httpx.get(f"{base}/ledger/events", timeout=10).text
        assert "<pre>POST /v1/things HTTP/1.1" in page


def test_datasette_caps_bodies_for_display(tmp_path: Path) -> None:
    """Two 40 MB bodies: Datasette's `readable_events` answers, each row saying in words where to
    read the body instead of carrying it; a small body is shown whole. In plain SQL with
    `readable_events_shown`, a small gzip body that decodes past the cap is cut and says so, and
    `READABLE_EVENTS` still gives every body whole."""
    import gzip

    big = b"a large streamed answer line\n" * (40 * 1024 * 1024 // 29)
    spread = b"x" * (SHOWN_MAX + 10)
    gzip_head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n"
    home = tmp_path / "home"
    home.mkdir()
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    rows = [
        event(0, big),
        event(1, big + b"."),
        event(2, TEXT),
        event(3, gzip.compress(spread), head=gzip_head),
    ]
    ledger.append(batch(rows))
    ledger.close()
    with datasette_serving(home / "ledger.db") as base:
        answer = httpx.get(f"{base}/ledger/readable_events.json?_shape=array", timeout=60)
    assert answer.status_code == 200, answer.text[:500]
    bodies = {row["event_id"]: row["body"] for row in answer.json()}
    for large in ("ev-000000", "ev-000001"):
        assert bodies[large].startswith("[a body of ") and "flightlog browse" in bodies[large]
    assert bodies["ev-000002"] == TEXT.decode()
    conn = sqlite3.connect(home / "ledger.db")
    register(conn, open_blob_store((home / "blobs").as_uri()))
    shown = dict(conn.execute(f"SELECT event_id, body FROM ({readable_events_shown()})").fetchall())
    assert shown["ev-000003"].startswith("x" * SHOWN_MAX)
    assert shown["ev-000003"].endswith(
        f"[cut here: the first {SHOWN_MAX:,} of {SHOWN_MAX + 10:,} characters shown]"
    )
    assert _bodies(conn)["ev-000001"] == (big + b".").decode()


def test_compressed_bodies_read_as_their_text(tmp_path: Path) -> None:
    """Answers as real APIs send them, gzip, br, zstd and stacked (`gzip, br`): `body` is their decoded
    text, `payload` stays the exact compressed bytes; an unknown coding or a corrupt body reads as
    stored (NULL when that is not text); a decompression bomb reads cut at the cap, not whole."""
    import gzip

    import brotli
    import zstandard

    def answer(i: int, body: bytes, coding: str) -> object:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: {coding}\r\n\r\n"
        return event(i, body, head=head.encode())

    bomb = brotli.compress(b"{" + b" " * (80 * 1024 * 1024) + b"}", quality=5)
    rows = [
        answer(1, gzip.compress(TEXT, mtime=0), "gzip"),
        answer(3, brotli.compress(TEXT), "br"),
        answer(5, zstandard.ZstdCompressor().compress(TEXT), "zstd"),
        answer(7, brotli.compress(gzip.compress(TEXT)), "gzip, br"),
        answer(9, TEXT, "compress"),
        answer(11, b"\x1f\x8bnot gzip at all \xff", "gzip"),
        answer(13, bomb, "br"),
    ]
    db = tmp_path / "ledger.db"
    ledger = open_ledger(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    ledger.append(batch(rows))  # type: ignore[arg-type]
    ledger.close()
    conn = sqlite3.connect(db)
    register(conn)
    bodies = _bodies(conn)
    assert [bodies[f"ev-{i:06d}"] for i in (1, 3, 5, 7, 9)] == [TEXT.decode()] * 5
    assert bodies["ev-000011"] is None
    assert len(bodies["ev-000013"] or "") == 64 * 1024 * 1024
    stored = conn.execute(
        "SELECT flightlog_payload(b.data, b.sha256) FROM events e JOIN blobs b ON b.sha256 = e.payload_sha256"
        " WHERE e.event_id = 'ev-000001'"
    ).fetchone()[0]
    assert stored == gzip.compress(TEXT, mtime=0)
