"""No secret value ever reaches the disk: canaries in every place a request can carry them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
from sqlalchemy import text

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

CANARIES = {
    "CANARY_HEADER": "canary-hdr-5f1e2d",
    "CANARY_QUERY": "canary-qry-7a8b9c",
    "CANARY_JSON": 'canary-json-"3c4d5e',
    "CANARY_FORM": "canary form/9&x",
    "CANARY_BASIC": "canary-basic-pw-1a2b",
    "CANARY_GZIP": "canary-gzip-6f7e8d",
}


def test_canaries_never_reach_database_or_blobs(home: Path, tmp_path: Path, http_upstream: Upstream) -> None:
    """Header, query, JSON body, form body, Basic auth and gzip body: replaced by [NAME], names kept."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text("".join(f"{name}='{value}'\n" for name, value in CANARIES.items()))
    db = tmp_path / "db" / "ledger.db"
    db.parent.mkdir()
    blobs = tmp_path / "blobs"
    base = http_upstream.base
    with live_proxy(
        home, f"sqlite:///{db}", blobs_url=blobs.as_uri(), args=["--secrets", str(secrets)]
    ) as proxy:
        with httpx.Client(proxy=proxy.url, timeout=10) as c:
            c.get(
                f"{base}/echo",
                params={"key": CANARIES["CANARY_QUERY"]},
                headers={"X-Custom": CANARIES["CANARY_HEADER"]},
            )
            c.post(f"{base}/echo", json={"token": CANARIES["CANARY_JSON"]})
            c.post(f"{base}/echo", data={"pw": CANARIES["CANARY_FORM"]})
            c.get(f"{base}/echo", auth=("user", CANARIES["CANARY_BASIC"]))
            packed = gzip.compress(json.dumps({"t": CANARIES["CANARY_GZIP"]}).encode())
            c.post(
                f"{base}/echo",
                content=packed,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
            answer = c.get(f"{base}/gzip", headers={"X-Echo": CANARIES["CANARY_GZIP"]})
            assert CANARIES["CANARY_GZIP"] in answer.text, "the client itself gets the real bytes"
            big = CANARIES["CANARY_JSON"].encode() * 20_000 + b"x" * 300_000  # spooled to the blob folder
            c.post(f"{base}/echo", content=big, headers={"Content-Type": "application/octet-stream"})
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        events = wait_for(ledger, "1 = 1", {}, 14)
    assert len(events) == 14
    names = set().union(*(e.redacted for e in events))
    assert set(CANARIES) <= names, names
    with ledger.engine.connect() as conn:
        heads = [bytes(h) for (h,) in conn.execute(text("SELECT head FROM events"))]
        urls = [u for (u,) in conn.execute(text("SELECT url FROM events"))]
    payloads = [ledger.payload(e.payload_sha256) for e in events if e.payload_sha256]
    ledger.close()
    readable = heads + [u.encode() for u in urls] + payloads
    readable += [gzip.decompress(p) for p in payloads if p[:2] == b"\x1f\x8b"]
    files = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".env"]
    for value in CANARIES.values():
        for form in {value.encode(), json.dumps(value)[1:-1].encode(), value.replace(" ", "+").encode()}:
            assert not any(form in blob for blob in readable + files), f"{value!r} found on disk"
    assert any(b"[CANARY_JSON]" in p for p in payloads)
    assert any(p.is_file() for p in blobs.rglob("*")), "the large body went to the blob folder"
