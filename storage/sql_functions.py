"""SQL functions that make a SQLite Ledger readable in any SQL tool: payloads and heads as text.

Payloads are zstd frames addressed by their SHA-256, so a plain `sqlite3` or Datasette user sees
opaque bytes. `register(conn, blobs)` adds these functions to a `sqlite3` connection:

    flightlog_payload(blobs.data, blobs.sha256)  the payload's bytes, decompressed and verified
                                                 (read from the blob store when stored there)
    flightlog_text(bytes)                        the bytes as text when they are strict UTF-8, else NULL
    flightlog_head(events.head)                  the exact head as text (latin-1: every byte kept)
    flightlog_decoded(bytes, events.head)        the payload with the Content-Encoding its head names
                                                 (gzip, deflate, br, zstd, stacked) undone, up to
                                                 `codings.READ_CAP`; as stored when it cannot be
    flightlog_cut(text, cap), flightlog_unshown(size, cap)   a body bounded for display

and `READABLE_EVENTS` is the query that joins them into one row per event: `body` is the decoded
payload as text (real APIs compress their answers), `payload` untouched stays the exact bytes. A
payload that does not hash to its address raises instead of returning wrong bytes, as every other
read does. `readable_events_shown()` is the same bounded for a browser (Datasette's canned query).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

from formats import codings
from storage.blobstore import BlobStore
from storage.codec import decompress, is_text
from storage.errors import StorageError
from storage.heads import parse_head

READABLE_EVENTS: Final = """
SELECT e.event_id, e.action_id, e.at, e.kind, e.direction, e.method, e.url, e.status, e.agent,
       e.session, e.model, e.tokens_in, e.tokens_out, e.cost_usd, e.payload_state, e.redacted,
       e.error, flightlog_head(e.head) AS head,
       flightlog_text(flightlog_decoded(flightlog_payload(b.data, b.sha256), e.head)) AS body,
       e.payload_size
FROM events AS e LEFT JOIN blobs AS b ON b.sha256 = e.payload_sha256
ORDER BY e.at DESC, e.event_id
"""
"""One row per event with its head and (text) body readable, every body whole: plain SQL."""

SHOWN_MAX: Final = 1024 * 1024
"""The largest body (stored bytes, and characters once decoded) `readable_events_shown` reads: a
browser page of rows holding tens of megabytes each never finishes (Datasette's time limit)."""


def readable_events_shown(cap: int = SHOWN_MAX) -> str:
    """`READABLE_EVENTS` for display (Datasette's canned query): a body stored larger than `cap` is
    not read at all (verifying it means reading it whole) and says where to read it instead; a
    decoded one is cut at `cap` characters and says so."""
    whole = "flightlog_text(flightlog_decoded(flightlog_payload(b.data, b.sha256), e.head))"
    shown = (
        f"CASE WHEN e.payload_size > {int(cap)} THEN flightlog_unshown(e.payload_size, {int(cap)}) "
        f"ELSE flightlog_cut({whole}, {int(cap)}) END AS body"
    )
    return READABLE_EVENTS.replace(f"{whole} AS body", shown)


def unshown(size: int | None, cap: int) -> str:
    """`flightlog_unshown(size, cap)`: the words standing in for a body too large to show."""
    return (
        f"[a body of {size:,} bytes, over the {cap:,} shown here: read it with `flightlog browse`, "
        "`flightlog export`, or the plain query storage.sql_functions.READABLE_EVENTS]"
    )


def cut(text: str | None, cap: int) -> str | None:
    """`flightlog_cut(text, cap)`: the text, or its first `cap` characters and a line saying so."""
    if text is None or len(text) <= cap:
        return text
    return text[:cap] + f"\n[cut here: the first {cap:,} of {len(text):,} characters shown]"


def payload_reader(blobs: BlobStore | None) -> Callable[[bytes | None, str | None], bytes | None]:
    """`flightlog_payload(data, sha256)`: inline frames from `data`, the others from `blobs`."""

    def payload(data: bytes | None, sha256: str | None) -> bytes | None:
        if sha256 is None:
            return None
        if data is None:
            if blobs is None:
                return None
            try:
                data = blobs.get(sha256)
            except StorageError:
                return None
        return decompress(bytes(data), sha256)

    return payload


def text(data: bytes | None) -> str | None:
    """`flightlog_text(bytes)`: text only where decoding gives back the identical bytes."""
    if data is None or not is_text(bytes(data)):
        return None
    return bytes(data).decode("utf-8")


def decoded(data: bytes | None, head_bytes: bytes | None) -> bytes | None:
    """`flightlog_decoded(bytes, head)`: the body with its head's content coding undone (bounded by
    `codings.READ_CAP`: a bomb gives its first 64 MiB), or as stored when it names none, one this
    does not know, or does not decode."""
    if data is None:
        return None
    coding = parse_head(bytes(head_bytes or b"")).get(b"content-encoding")
    if not coding:
        return bytes(data)
    return codings.readable(bytes(data), coding.decode("latin-1")).data


def head(data: bytes | None) -> str | None:
    """`flightlog_head(head)`: a head's bytes as text; latin-1 maps every byte, so nothing is lost."""
    return None if data is None else bytes(data).decode("latin-1")


def register(conn: sqlite3.Connection, blobs: BlobStore | None = None) -> None:
    """Add flightlog's functions to a SQLite connection (Datasette's plugin calls this for each one)."""
    conn.create_function("flightlog_payload", 2, payload_reader(blobs), deterministic=True)
    conn.create_function("flightlog_text", 1, text, deterministic=True)
    conn.create_function("flightlog_head", 1, head, deterministic=True)
    conn.create_function("flightlog_decoded", 2, decoded, deterministic=True)
    conn.create_function("flightlog_unshown", 2, unshown, deterministic=True)
    conn.create_function("flightlog_cut", 2, cut, deterministic=True)
