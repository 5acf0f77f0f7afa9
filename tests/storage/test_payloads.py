"""Payload bytes round-trip exactly: inline, through the folder store and through S3."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.codec import sha256_hex
from storage.events import INLINE_MAX, PayloadRef
from storage.ledger import Ledger, open_ledger
from tests.storage.factory import batch, event

EDGES = {
    "empty": b"",
    "nul": b"\x00" * 17,
    "invalid-utf8": b"\xc3\x28\xa0\xa1\xff",
    "inline-max-minus-1": os.urandom(INLINE_MAX - 1),
    "inline-max": os.urandom(INLINE_MAX),
    "inline-max-plus-1": os.urandom(INLINE_MAX + 1),
    "several-mib": os.urandom(3 * 1024 * 1024 + 7),
}


@pytest.fixture(params=["folder", "s3"])
def blobs_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "folder":
        return (tmp_path / "blobs").as_uri()
    endpoint = request.getfixturevalue("s3_endpoint")
    return f"s3://ledger/payloads?endpoint={endpoint}"


@pytest.fixture
def ledger(ledger_url: str, blobs_url: str):  # type: ignore[no-untyped-def]
    opened = open_ledger(ledger_url, blobs_url, retry_seconds=2)
    yield opened
    opened.close()


def roundtrip(ledger: Ledger, i: int, data: bytes) -> bytes:
    ledger.append(batch([event(i, payload=data)], position=i))
    stored = ledger.event(f"ev-{i:06d}")
    assert stored is not None
    assert stored.payload_sha256 == sha256_hex(data)
    assert stored.payload_size == len(data)
    return ledger.payload(stored.payload_sha256)


@pytest.mark.parametrize("name", list(EDGES))
def test_edge_payloads_round_trip_exactly(ledger: Ledger, name: str) -> None:
    """Empty, NUL, invalid UTF-8, 256 KiB - 1 / exactly / + 1 and several MiB come back byte for byte."""
    data = EDGES[name]
    assert roundtrip(ledger, 1, data) == data


def test_payload_location_follows_the_inline_limit(ledger: Ledger) -> None:
    """Up to 256 KiB inside the database; above it in the blob store, compressed, with no inline copy."""
    small, large = os.urandom(INLINE_MAX), os.urandom(INLINE_MAX + 1)
    ledger.append(batch([event(1, payload=small), event(2, payload=large)]))
    with ledger.engine.connect() as conn:
        rows = dict(
            conn.exec_driver_sql("SELECT sha256, location FROM blobs").all()  # type: ignore[arg-type]
        )
    assert rows == {sha256_hex(small): "inline", sha256_hex(large): "store"}
    assert sha256_hex(large) in set(ledger.blobs.addresses())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes_round_trip(ledger: Ledger, data: bytes) -> None:
    """Any bytes at all: same bytes back, and `payload_text` only when strict UTF-8 round-trips."""
    i = abs(hash(data)) % 10**6
    assert roundtrip(ledger, i, data) == data
    stored = ledger.event(f"ev-{i:06d}")
    try:
        expect_text = data.decode("utf-8").encode("utf-8") == data
    except UnicodeDecodeError:
        expect_text = False
    assert stored is not None and stored.payload_text is expect_text


def test_a_spooled_stream_is_stored_once_and_read_back(ledger: Ledger) -> None:
    """A body received in chunks past the inline limit is uploaded by the spool and referenced by ref."""
    chunks = [os.urandom(64 * 1024) for _ in range(6)] + ["é".encode() * 3]
    spool = ledger.spool()
    for chunk in chunks:
        spool.write(chunk)
    ref = spool.close()
    assert isinstance(ref, PayloadRef) and ref.size == sum(map(len, chunks)) and ref.text is False
    ledger.append(batch([event(1, payload=ref), event(3, payload=ref)]))
    assert ledger.payload(ref.sha256) == b"".join(chunks)


def test_a_small_spool_comes_back_as_bytes(ledger: Ledger) -> None:
    """Under the inline limit the spool hands the bytes back to travel inline on the event."""
    spool = ledger.spool()
    spool.write(b"data: one\n\n")
    spool.write(b"data: two\n\n")
    assert spool.close() == b"data: one\n\ndata: two\n\n"
