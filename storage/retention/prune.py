"""Pruning: a payload's bytes removed under a signed record, its events and blob row kept.

How append-only and erasure coexist: nothing recorded is ever deleted or rewritten, except the
bytes themselves, and only on one path. A pruning is a batch of the operator's collector (its chain
signed as any other) holding one `ledger.prune` event per up to `PER_RECORD` payloads; its payload
is the **prune record**: the hashes removed, why (`--reason`, or the policy's description), when,
signed by the operator's root key. In that same transaction each payload gets a row in `pruned`
(append-only) and an inline payload's bytes are emptied: the blobs' trigger refuses every UPDATE
but that one, and only for a payload `pruned` names (migration 0020). A payload in the blob store
loses its object right after the commit (`ledger erase` again finishes one that was left).

`ledger verify` then tells the three apart: **pruned** (a `pruned` row under a record whose root
signature verifies: its bytes may be gone), **missing** (an object gone with no record), and
**tampered** (emptied or altered bytes with no record, a `pruned` row no record names). Readers show
"pruned on DATE (reason)" where the bytes were.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage import kinds
from storage.chain import links as chain
from storage.chain.signing import LedgerKeys, public_hex, short, sign, signed_text, verifies
from storage.errors import MissingPayload, PrunedPayload, StorageError
from storage.events import Batch, Event
from storage.ledger import Ledger
from storage.retention.pruned import Pruned
from storage.sqlite_setup import sqlite_time

VERSION: Final = "flightlog-prune/1"
PER_RECORD: Final = 1000
"""Payloads named by one prune record (one event); a pruning of more is several, one batch each."""


def pruning_collector(home: Path) -> str:
    """The collector prunings are chained under from one FLIGHTLOG_HOME (`retention@` and a digest
    of the home: operators of several machines each under their own key)."""
    return f"retention@{hashlib.sha256(str(home.expanduser().resolve()).encode()).hexdigest()[:8]}"


def record(hashes: Sequence[str], reason: str, at: str, root: Any) -> bytes:
    """A prune record's bytes: what was removed and why, signed by the root."""
    body = {
        "version": VERSION,
        "hashes": sorted(hashes),
        "reason": reason,
        "at": at,
        "root": public_hex(root),
    }
    return json.dumps(
        {"record": body, "signature": sign(root, signed_text("prune", body))},
        sort_keys=True,
        separators=(",", ":"),
    ).encode("ascii")


def read_record(data: bytes) -> tuple[dict[str, Any], str] | None:
    """A prune record's body and signature; None when the bytes are not one."""
    try:
        value = json.loads(data)
        body, signature = value["record"], value["signature"]
        if body["version"] != VERSION or not isinstance(body["hashes"], list):
            return None
        return body, str(signature)
    except (ValueError, KeyError, TypeError):
        return None


@dataclass
class Pruning:
    """What one `prune` did."""

    pruned: list[str]
    already: list[str]
    records: list[str]
    """The prune events written."""
    freed: int = 0
    """Bytes of payload removed."""


def prune(ledger: Ledger, shas: Sequence[str], reason: str) -> Pruning:
    """Remove the bytes of `shas` under signed prune records, keeping every event and blob row; an
    address already pruned is finished (its store object removed) and named in `already`."""
    keys = ledger.keys
    if not isinstance(keys, LedgerKeys):
        raise StorageError(
            "pruning is signed with FLIGHTLOG_HOME's root key: this Ledger was opened without it"
        )
    if not reason.strip():
        raise StorageError("a pruning needs a reason (--reason TEXT): it is kept with the record")
    wanted = sorted({s.strip().lower() for s in shas})
    rows = ledger._read(lambda c: _blobs(c, wanted))
    if unknown := [s for s in wanted if s not in rows]:
        raise MissingPayload(unknown[0], "no such payload in the Ledger")
    if protected := [s for s in wanted if rows[s]["record"]]:
        raise StorageError(
            f"payload {protected[0]} is a prune record: the Ledger's own records are never pruned"
        )
    done = Pruning([], [s for s in wanted if rows[s]["pruned"]], [])
    todo = [s for s in wanted if not rows[s]["pruned"]]
    collector = pruning_collector(keys.home)
    root = keys.root()
    for i in range(0, len(todo), PER_RECORD):
        chunk = todo[i : i + PER_RECORD]
        at = sqlite_time(datetime.now(UTC))
        data = record(chunk, reason, at, root)
        event_id = f"prune:{hashlib.sha256(data).hexdigest()[:32]}"
        event = Event(
            event_id=event_id,
            action_id=event_id,
            kind=kinds.LEDGER_PRUNE,
            direction="in",
            at=datetime.now(UTC),
            collector=collector,
            url="flightlog:prune",
            payload=data,
            payload_state="complete",
        )
        position = (ledger.position(collector) or 0) + 1

        def mark(conn: Connection, chunk: list[str] = chunk, event_id: str = event_id, at: str = at) -> None:
            _mark(conn, chunk, event_id, at, reason)

        ledger.append(Batch(collector=collector, position=position, events=(event,)), also=mark)
        done.records.append(event_id)
        done.pruned += chunk
        done.freed += sum(int(rows[s]["size"]) for s in chunk)
    for sha in [*done.pruned, *done.already]:
        if rows[sha]["location"] == "store":
            ledger.blobs.delete(sha)
    return done


def _blobs(conn: Connection, shas: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each address's blob row facts: size, location, whether pruned, whether a record's payload."""
    found: dict[str, dict[str, Any]] = {}
    m = "?" if conn.dialect.name == "sqlite" else "%s"
    for i in range(0, len(shas), 500):
        chunk = list(shas[i : i + 500])
        sql = (
            "SELECT b.sha256, b.size, b.location,"
            " EXISTS (SELECT 1 FROM pruned p WHERE p.sha256 = b.sha256),"
            f" EXISTS (SELECT 1 FROM events e WHERE e.payload_sha256 = b.sha256 AND e.kind = {m})"
            f" FROM blobs b WHERE b.sha256 IN ({', '.join(m for _ in chunk)})"
        )
        for sha, size, location, was, is_record in chain.query(conn, sql, [kinds.LEDGER_PRUNE, *chunk]):
            found[sha] = {"size": size, "location": location, "pruned": bool(was), "record": bool(is_record)}
    return found


def _mark(conn: Connection, shas: Sequence[str], event_id: str, at: str, reason: str) -> None:
    """Inside the prune batch's transaction: the `pruned` rows, then the inline bytes emptied (the
    one UPDATE the blobs' trigger lets through). SQLite overwrites the freed space with zeros
    (`secure_delete`), so the bytes are gone from the file, not only unlinked from the row."""
    sqlite = conn.dialect.name == "sqlite"
    m = "?" if sqlite else "%s"
    if sqlite:
        chain.query(conn, "PRAGMA secure_delete = ON")
    with chain.DriverCursor(conn) as cursor:
        cursor.executemany(
            f"INSERT INTO pruned (sha256, event_id, pruned_at, reason) VALUES ({m}, {m}, {m}, {m})",
            [(s, event_id, at, reason) for s in shas],
        )
        cursor.executemany(
            f"UPDATE blobs SET data = {m} WHERE sha256 = {m} AND location = 'inline'",
            [(b"", s) for s in shas],
        )


@dataclass
class PruneCheck:
    """What `verify` found of the prunings."""

    pruned: dict[str, Pruned]
    problems: list[str]


def check(ledger: Ledger, trusted: Collection[str]) -> PruneCheck:
    """Every `pruned` row is named by a prune record whose root signature verifies under a trusted
    root, with the same event; every record's hashes are marked pruned."""
    problems: list[str] = []

    def read(conn: Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        m = "?" if conn.dialect.name == "sqlite" else "%s"
        records = chain.query(
            conn,
            f"SELECT event_id, payload_sha256 FROM events WHERE kind = {m} ORDER BY event_id",
            [kinds.LEDGER_PRUNE],
        )
        marks = chain.query(conn, "SELECT sha256, event_id, pruned_at, reason FROM pruned ORDER BY sha256")
        return records, marks

    records, marks = ledger._read(read)
    named: dict[str, str] = {}
    for event_id, sha in records:
        try:
            parsed = read_record(ledger.payload(sha)) if sha else None
        except (StorageError, PrunedPayload):
            parsed = None
        if parsed is None:
            problems.append(f"forged: prune record {event_id}: its payload is not a prune record")
            continue
        body, signature = parsed
        if not verifies(str(body.get("root")), signature, signed_text("prune", body)):
            problems.append(f"forged: prune record {event_id}: its root signature does not verify")
            continue
        if body["root"] not in trusted:
            problems.append(
                f"refused: prune record {event_id} is signed by root key {short(str(body['root']))},"
                " which this"
                " verify does not trust"
            )
        for h in body["hashes"]:
            named[str(h)] = str(event_id)
    found: dict[str, Pruned] = {}
    for sha, event_id, at, reason in marks:
        if named.get(sha) != event_id:
            problems.append(f"forged: payload {sha} is marked pruned, but no signed prune record names it")
        found[sha] = Pruned(sha, str(at), str(reason), str(event_id))
    for sha, event_id in sorted(named.items()):
        if sha not in found:
            problems.append(f"deleted: the pruned mark of payload {sha} (prune record {event_id}) is gone")
    return PruneCheck(found, problems)
