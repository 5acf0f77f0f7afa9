"""Tampering with a keyed Ledger, case by case, on SQLite and PostgreSQL: `ledger verify` finds each.

The Ledger: two collectors (`test`, `other`), three keyed batches each, every event with a payload.
Each case rewrites it as someone holding the database could (SQLite: the `sqlite3` client with
every trigger dropped; PostgreSQL: a superuser with triggers off), or swaps the chain keys a
verifier holds, then runs verify: it must report a line naming what was done (`expect`). Cases
marked `head` are the ones README lists as out of verify's reach on its own (a removed tail, a
removed collector, anything rewritten by someone holding the key too): they are found against the
heads printed before the tampering (`--head`), and verify without them must say nothing.

The last test prints the count found, for the closing note.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage.chain import links as chain
from storage.chain.keys import ChainKeys
from storage.chain.verify import VerifyReport, verify
from storage.ledger import Ledger, open_ledger
from storage.rows import COLUMNS
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer

COLS = ", ".join(COLUMNS)
TRIGGERS = tuple(
    f"{table}_{what}"
    for table in ("events", "blobs", "batches", "chain_keys", "token_uses")
    for what in ("no_update", "no_delete", "no_reinsert")
)
FOUND: dict[str, list[int]] = {}
"""case -> [tried, found] over both engines, for the closing note."""


@dataclass
class World:
    ledger: Ledger
    tamper: Tamperer
    keys: dict[str, bytes]
    heads: tuple[str, ...]
    home: Path


def record(ledger: Ledger) -> None:
    for collector, first in (("test", 0), ("other", 100)):
        for b in range(3):
            ids = range(first + 3 * b, first + 3 * b + 3)
            events = [event(i, payload=f"body {i}".encode(), collector=collector) for i in ids]
            ledger.append(batch(events, position=b + 1, collector=collector))


@pytest.fixture
def world(ledger_url: str, tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "home"
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri(), keys=ChainKeys(home))
    record(ledger)
    report = verify(ledger)
    assert report.ok and not report.chain.unkeyed, report.chain.problems
    yield World(
        ledger,
        Tamperer(ledger_url),
        ChainKeys(home).held(),
        tuple(h.digest for h in report.chain.heads),
        home,
    )
    ledger.close()


def sql(text: str | Callable[[World], str]) -> Callable[[World], None]:
    """Run SQL past every trigger; `text` may be made for the engine (`earlier`)."""
    return lambda w: w.tamper.run(text(w) if callable(text) else text, drop=TRIGGERS)


def earlier(w: World, column: str) -> str:
    """SQL for a time column moved back (SQLite keeps times as text: its year replaced)."""
    return f"'1999' || substr({column}, 5)" if w.tamper.sqlite else f"{column} - INTERVAL '1 day'"


def copy_of(source: str, **changes: str) -> str:
    values = ", ".join(changes.get(c, c) for c in COLUMNS)
    return f"SELECT {values} FROM events WHERE event_id = '{source}'"


def blob_of(w: World, event_id: str) -> str:
    with w.ledger.engine.connect() as conn:
        return str(
            conn.exec_driver_sql(f"SELECT payload_sha256 FROM events WHERE event_id = '{event_id}'").scalar()
        )


def replace_row(w: World) -> None:
    if w.tamper.sqlite:
        w.tamper.run(
            f"INSERT OR REPLACE INTO events ({COLS}) {copy_of('ev-000001', status='599')}", drop=TRIGGERS
        )
    else:
        w.tamper.run(
            f"INSERT INTO events ({COLS}) {copy_of('ev-000001')}"
            " ON CONFLICT (event_id) DO UPDATE SET status = 599"
        )


def ghost_chain(w: World) -> None:
    """A new collector whose chain is computed with `storage.chain.links` as the writer does, no key."""
    w.tamper.run(
        f"INSERT INTO events ({COLS}) {copy_of('ev-000004', event_id="'ev-ghost'", collector="'ghost'")}",
        drop=TRIGGERS,
    )
    with w.ledger.engine.connect() as conn:
        row = conn.exec_driver_sql(f"SELECT {COLS} FROM events WHERE event_id = 'ev-ghost'").one()
    leaf = chain.stored_leaf(tuple(row), list(COLUMNS))
    assert leaf is not None
    committed = "2026-11-30 12:00:00.000000"
    head = chain.header("ghost", 1, 1, "ghost-1", committed, COLUMNS, 1)
    digest = chain.digest(chain.genesis("ghost", []), head, [leaf])
    w.tamper.run(
        "INSERT INTO batches (batch_id, collector, position, received, new, duplicates, conflicts, raw_bytes,"
        " stored_bytes, committed_at, chain_index, digest, event_ids, event_leaves, event_columns) VALUES"
        f" ('ghost-1', 'ghost', 1, 1, 1, 0, '[]', 0, 0, '{committed}', 1, '{digest}', '[\"ev-ghost\"]',"
        f" '{leaf[:8].hex()}', '{','.join(COLUMNS)}')",
        drop=TRIGGERS,
    )


def rechain(w: World, collector: str, start: int, key: bytes | None) -> None:
    """Recompute the collector's digests from batch `start` on, with `key` (or none)."""
    with w.ledger.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT batch_id, position, committed_at, chain_index, digest, event_ids, event_columns"
            f" FROM batches WHERE collector = '{collector}' ORDER BY chain_index"
        ).all()
        previous = chain.genesis(collector, [])
        for batch_id, position, committed, index, digest, ids, columns in rows:
            if index >= start:
                names, cols = json.loads(ids), columns.split(",")
                among = ", ".join(repr(n) for n in names)
                query = f"SELECT event_id, {columns} FROM events WHERE event_id IN ({among})"
                found = {r[0]: tuple(r[1:]) for r in conn.exec_driver_sql(query)}
                leaves = [chain.stored_leaf(found[n], cols) for n in names]
                head = chain.header(
                    collector,
                    index,
                    position,
                    batch_id,
                    chain.time_text(committed),
                    cols,
                    len(names),
                    keyed=True,
                )
                digest = chain.digest(previous, head, leaves, key)  # type: ignore[arg-type]
                prefixes = "".join(leaf[:8].hex() for leaf in leaves)  # type: ignore[index]
                w.tamper.run(
                    f"UPDATE batches SET digest = '{digest}', event_leaves = '{prefixes}'"
                    f" WHERE batch_id = '{batch_id}'",
                    drop=TRIGGERS,
                )
            previous = digest


def swap_key_file(w: World) -> None:
    w.keys["test"] = w.keys["other"]


def drop_key(w: World) -> None:
    del w.keys["test"]


Case = tuple[Callable[[World], None], str, bool]
"""(the tampering, a fragment of the line verify must print, found only against kept heads)."""
T2 = "WHERE collector = 'test' AND chain_index = 2"
EV3, EV4 = "WHERE event_id = 'ev-000003'", "WHERE event_id = 'ev-000004'"
BATCH_2 = "('ev-000003','ev-000004','ev-000005')"
BATCH_3 = "('ev-000006','ev-000007','ev-000008')"
NO_PAYLOAD = "payload_state = 'none', payload_sha256 = NULL, payload_size = NULL, payload_text = NULL"
TWICE = '["ev-000003","ev-000004","ev-000005","ev-000000"]'
OLD_ROW = (
    "INSERT INTO batches (batch_id, collector, position, received, new, duplicates, conflicts, raw_bytes,"
    " stored_bytes, committed_at) SELECT 'legacy-x', 'test', 0, 1, 1, 0, '[]', 0, 0, committed_at"
    " FROM batches WHERE collector = 'test' AND chain_index = 1"
)
SWAP = (
    "UPDATE chain_keys SET collector = 'x' WHERE collector = 'test';"
    " UPDATE chain_keys SET collector = 'test' WHERE collector = 'other';"
    " UPDATE chain_keys SET collector = 'other' WHERE collector = 'x'"
)
REORDER = (
    "UPDATE batches SET chain_index = -1 WHERE collector = 'test' AND chain_index = 1;"
    f" UPDATE batches SET chain_index = 1 {T2};"
    " UPDATE batches SET chain_index = 2 WHERE collector = 'test' AND chain_index = -1"
)
UNVERIFIED = "forged: collector test's key registration does not verify"
FIRST_LEAF = "substr(event_leaves, 1, 16)"
MOVED = '["ev-000003","ev-000004"]'


def edit_and_rechain(with_key: bool) -> Callable[[World], None]:
    def run(w: World) -> None:
        sql(f"UPDATE events SET status = 201 {EV4}")(w)
        rechain(w, "test", 2, w.keys["test"] if with_key else None)

    return run


def blob_deleted(w: World) -> None:
    sql(f"DELETE FROM blobs WHERE sha256 = '{blob_of(w, 'ev-000003')}'")(w)


def blob_swapped(w: World) -> None:
    other = f"(SELECT data FROM blobs WHERE sha256 = '{blob_of(w, 'ev-000004')}')"
    sql(f"UPDATE blobs SET data = {other} WHERE sha256 = '{blob_of(w, 'ev-000003')}'")(w)


CASES: dict[str, Case] = {
    "event edited": (
        sql(f"UPDATE events SET url = 'https://evil.example/' {EV4}"),
        "forged: event ev-000004",
        False,
    ),
    "event deleted": (sql(f"DELETE FROM events {EV4}"), "deleted: event ev-000004", False),
    "event inserted": (
        sql(f"INSERT INTO events ({COLS}) {copy_of('ev-000004', event_id="'ev-forged'")}"),
        "inserted: event ev-forged",
        False,
    ),
    "event replaced in place": (replace_row, "forged: event ev-000001", False),
    "event moved to another collector": (
        sql("UPDATE events SET collector = 'other' WHERE event_id = 'ev-000002'"),
        "forged: event ev-000002",
        False,
    ),
    "event reordered (seq)": (sql(f"UPDATE events SET seq = 999 {EV4}"), "forged: event ev-000004", False),
    "event time moved": (
        sql(lambda w: f"UPDATE events SET at = {earlier(w, 'at')} {EV4}"),
        "forged: event ev-000004",
        False,
    ),
    "event's payload claim dropped": (
        sql(f"UPDATE events SET {NO_PAYLOAD} {EV3}"),
        "forged: event ev-000003",
        False,
    ),
    "event's redactions edited": (
        sql(f"UPDATE events SET redacted = '[\"K\"]' {EV3}"),
        "forged: event ev-000003",
        False,
    ),
    "blob row deleted under a complete event": (
        blob_deleted,
        "deleted: the payload of event ev-000003",
        False,
    ),
    "blob bytes swapped": (blob_swapped, "corrupted: ", False),
    "event claimed by two batches": (
        sql(f"UPDATE batches SET event_ids = '{TWICE}', event_leaves = event_leaves || {FIRST_LEAF} {T2}"),
        "claimed by 2 batches",
        False,
    ),
    "batch removed (middle)": (
        sql(f"DELETE FROM events WHERE event_id IN {BATCH_2}; DELETE FROM batches {T2}"),
        "missing: batch #2 of test",
        False,
    ),
    "batch row removed, events kept": (sql(f"DELETE FROM batches {T2}"), "missing: batch #2 of test", False),
    "batches reordered": (sql(REORDER), "forged: batch #1 of test", False),
    "batch position edited": (
        sql(f"UPDATE batches SET position = 70 {T2}"),
        "forged: batch #2 of test",
        False,
    ),
    "batch commit time edited": (
        sql(lambda w: f"UPDATE batches SET committed_at = {earlier(w, 'committed_at')} {T2}"),
        "forged: batch #2 of test",
        False,
    ),
    "batch digest replaced": (
        sql(f"UPDATE batches SET digest = '{'0' * 64}' {T2}"),
        "forged: batch #2 of test",
        False,
    ),
    "batch given to a new collector": (
        sql("UPDATE batches SET collector = 'renamed' WHERE collector = 'test' AND chain_index = 3"),
        "refused: collector renamed",
        False,
    ),
    "events moved between batches": (
        sql(f"UPDATE batches SET event_ids = '{MOVED}', event_leaves = substr(event_leaves, 1, 32) {T2}"),
        "inserted: event ev-000005",
        False,
    ),
    "delivered position edited": (
        sql("UPDATE positions SET position = 1 WHERE collector = 'test'"),
        "forged: collector test's delivered position",
        False,
    ),
    "pre-chain batch row and its event forged": (
        sql(f"INSERT INTO events ({COLS}) {copy_of('ev-000004', event_id="'ev-old'")}; {OLD_ROW}"),
        "inserted: a batch row from before the chain",
        False,
    ),
    "new collector chained without a key": (ghost_chain, "refused: collector ghost", False),
    "new collector, every real head kept": (ghost_chain, "refused: collector ghost", True),
    "registration removed": (
        sql("DELETE FROM chain_keys WHERE collector = 'test'"),
        "forged: collector test's key registration is gone",
        False,
    ),
    "registration's first keyed batch moved": (
        sql("UPDATE chain_keys SET first_index = 3 WHERE collector = 'test'"),
        UNVERIFIED,
        False,
    ),
    "registration's seal rewritten": (
        sql("UPDATE chain_keys SET seal = replace(seal, '[0,', '[1,') WHERE collector = 'test'"),
        UNVERIFIED,
        False,
    ),
    "registrations swapped between collectors": (sql(SWAP), UNVERIFIED, False),
    "key file swapped for another collector's": (swap_key_file, UNVERIFIED, False),
    "verifier lacks a collector's key": (drop_key, "refused: collector test", False),
    "row edited, chain recomputed without the key": (
        edit_and_rechain(False),
        "forged: batch #2 of test",
        False,
    ),
    "row edited, chain recomputed with the key": (edit_and_rechain(True), "truncated: head", True),
    "tail removed": (
        sql(
            f"DELETE FROM events WHERE event_id IN {BATCH_3};"
            " DELETE FROM batches WHERE collector = 'test' AND chain_index = 3;"
            " UPDATE positions SET position = 2 WHERE collector = 'test'"
        ),
        "truncated: head",
        True,
    ),
    "whole collector removed": (
        sql(
            "DELETE FROM events WHERE collector = 'other'; DELETE FROM batches WHERE collector = 'other';"
            " DELETE FROM positions WHERE collector = 'other';"
            " DELETE FROM chain_keys WHERE collector = 'other'"
        ),
        "truncated: head",
        True,
    ),
}


def lines(report: VerifyReport) -> list[str]:
    return [
        *report.chain.problems,
        *(f"corrupted: {s}" for s in report.corrupted),
        *(f"missing: {s}" for s in report.missing),
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_each_tampering_is_found(world: World, case: str) -> None:
    """After the tampering verify is not ok and prints a line naming it; a case README lists as out
    of verify's own reach is found against the heads kept before, and only then."""
    tampering, expect, needs_head = CASES[case]
    tampering(world)
    alone = verify(world.ledger, keys=world.keys)
    anchored = verify(world.ledger, keys=world.keys, anchors=world.heads)
    found = anchored if needs_head else alone
    counts = FOUND.setdefault(case, [0, 0])
    counts[0] += 1
    counts[1] += int(not found.ok and any(expect in line for line in lines(found)))
    assert not found.ok and any(expect in line for line in lines(found)), lines(found)
    if needs_head and case != "new collector, every real head kept":
        assert alone.ok, f"README says verify alone cannot see this; it printed {lines(alone)}"


def test_zz_report_the_tampering_found(capsys: pytest.CaptureFixture[str]) -> None:
    """Every case tried was found (the counts for the closing note; run with the cases above)."""
    tried = sum(t for t, _ in FOUND.values())
    found = sum(f for _, f in FOUND.values())
    assert tried and found == tried, {c: v for c, v in FOUND.items() if v[0] != v[1]}
    with capsys.disabled():
        print(f"\ntamper cases: {len(FOUND)} kinds, {found}/{tried} found ({100 * found // tried}%)")
