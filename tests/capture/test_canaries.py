"""No secret value ever reaches the disk: canaries in every place a request can carry them."""

from __future__ import annotations

import base64
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
    "CANARY_HEX": "canary-hex-4b5c6d",
    "CANARY_B64B64": "canary-b64b64-2e3f4a",
    "CANARY_ESCAPED": "canary-escaped-8c9d0e",
    "CANARY_NAKED_GZIP": "canary-naked-gzip-1d2e3f",
}


def every_char_escaped(value: str) -> str:
    """JSON with every character written as \\uXXXX."""
    return "".join(f"\\u{ord(c):04x}" for c in value)


def rare_forms(value: str) -> set[bytes]:
    """The rarer spellings the test sends: hex, base64 of base64, every character escaped."""
    raw = value.encode()
    return {
        raw.hex().encode(),
        raw.hex().upper().encode(),
        base64.b64encode(base64.b64encode(b"u:" + raw)),
        base64.b64encode(raw),
        every_char_escaped(value).encode(),
    }


def test_canaries_never_reach_database_or_blobs(home: Path, tmp_path: Path, http_upstream: Upstream) -> None:
    """Header, query, JSON body, form body, Basic auth, gzip body, hex, base64 of base64, JSON with
    every character escaped and a gzip body sent with no Content-Encoding: replaced by [NAME], names
    kept; no spelling of any canary in any file under the test's folders (FLIGHTLOG_HOME included)."""
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
            c.post(f"{base}/echo", content=f"sig={CANARIES['CANARY_HEX'].encode().hex().upper()}".encode())
            double = base64.b64encode(base64.b64encode(b"u:" + CANARIES["CANARY_B64B64"].encode()))
            c.post(f"{base}/echo", content=b'{"blob": "' + double + b'"}')
            escaped = every_char_escaped(CANARIES["CANARY_ESCAPED"])
            c.post(
                f"{base}/echo",
                content=f'{{"t": "{escaped}"}}'.encode(),
                headers={"Content-Type": "application/json"},
            )
            naked = gzip.compress(json.dumps({"t": CANARIES["CANARY_NAKED_GZIP"]}).encode())
            c.post(f"{base}/echo", content=naked, headers={"Content-Type": "application/octet-stream"})
            big = CANARIES["CANARY_JSON"].encode() * 20_000 + b"x" * 300_000  # spooled to the blob folder
            c.post(f"{base}/echo", content=big, headers={"Content-Type": "application/octet-stream"})
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        events = wait_for(ledger, "1 = 1", {}, 22)
    assert len(events) == 22
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
        spelled = {value.encode(), json.dumps(value)[1:-1].encode(), value.replace(" ", "+").encode()}
        for form in spelled | rare_forms(value):
            assert not any(form in blob for blob in readable + files), f"{value!r} found on disk"
    assert any(b"[CANARY_JSON]" in p for p in payloads)
    assert any(p[:2] == b"\x1f\x8b" and b"[CANARY_NAKED_GZIP]" in gzip.decompress(p) for p in payloads)
    assert any(p.is_file() for p in blobs.rglob("*")), "the large body went to the blob folder"
