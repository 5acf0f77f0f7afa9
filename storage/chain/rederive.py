"""Re-derive every collector's chain from the rows as stored, and say what does not fit.

Each finding is one line naming what happened: `forged` (an event's row, or a batch row, is not
what was recorded), `deleted` (an event a batch inserted is gone), `missing` (a batch of the chain
is gone), `inserted` (an event no batch of the chain inserted), `truncated` (a head digest the
operator kept is no longer in the chain: a tail was removed or the chain rewritten). This holds for
someone who dropped the triggers or is a database superuser; only rewriting a whole chain from the
tampered batch on escapes it, and that changes the head an operator anchored elsewhere.

Batches recorded before the chain existed (no digest) are counted, not chained: their events are
covered by their number, and their batch rows by the genesis digest each chain starts from.

Memory stays bounded: one batch's rows at a time; the events outside the chain are found in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from storage.chain import links as chain
from storage.chain import seal as chain_seal

MAX_NAMED = 1000
"""Events outside the chain named one per line; beyond that, one line counts the rest."""

_BATCH_COLUMNS = (
    "batch_id, collector, position, committed_at, chain_index, digest, event_ids, event_leaves, event_columns"
)


@dataclass(frozen=True, slots=True)
class Head:
    """A collector's newest chained batch: what an operator writes down to anchor the chain."""

    collector: str
    index: int
    digest: str


@dataclass
class ChainReport:
    """What re-deriving the chains found; `ok` only when no line was reported."""

    heads: list[Head] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    batches: int = 0
    chained_events: int = 0
    legacy_events: int = 0
    """Events recorded before the chain existed, covered by count only."""
    unkeyed: list[tuple[str, int]] = field(default_factory=list)
    """(collector, its last unkeyed batch): batches #1 to it were written before keyed chains."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


def _rows(conn: Connection, ids: Sequence[str], columns: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """The stored rows of `ids` (those that exist), as tuples of `columns`; event_id first."""
    found: dict[str, tuple[Any, ...]] = {}
    names = ", ".join(["event_id", *columns])
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ", ".join(_mark(conn) for _ in chunk)
        sql = f"SELECT {names} FROM events WHERE event_id IN ({marks})"
        for r in conn.exec_driver_sql(sql, tuple(chunk)):
            found[r[0]] = tuple(r[1:])
    return found


def _batches(conn: Connection, collector: str) -> Iterator[tuple[Any, ...]]:
    sql = (
        f"SELECT {_BATCH_COLUMNS} FROM batches WHERE collector = {_mark(conn)}"
        " AND chain_index IS NOT NULL ORDER BY chain_index"
    )
    yield from conn.exec_driver_sql(sql, (collector,))


def _decode(ids: Any, leaves: Any, columns: Any) -> tuple[list[str], list[str], list[str]] | None:
    try:
        names = json.loads(ids)
        cols = str(columns).split(",")
        step = chain.LEAF_HEX
        prefixes = [str(leaves)[i : i + step] for i in range(0, len(str(leaves)), step)]
        if (
            not isinstance(names, list)
            or len(prefixes) != len(names)
            or not all(isinstance(n, str) for n in names)
        ):
            return None
        return names, prefixes, cols
    except (TypeError, ValueError):
        return None


def _check_batch(
    conn: Connection,
    where: str,
    row: tuple[Any, ...],
    previous: str | None,
    report: ChainReport,
    keying: Keying,
) -> None:
    """One batch: its events still there and unchanged, and its digest re-derived from them (unless
    the batch before it is gone: `previous` None; or it is keyed and its key is not held)."""
    batch, collector, position, committed, index, stored, ids, leaves, columns = row
    decoded = _decode(ids, leaves, columns)
    if decoded is None:
        report.problems.append(f"forged: {where}: its list of events is unreadable")
        return
    names, prefixes, cols = decoded
    report.chained_events += len(names)
    try:
        stored_rows = _rows(conn, names, cols)
    except Exception as e:  # an unknown column name: the batch row was rewritten
        report.problems.append(
            f"forged: {where}: it names columns the events table lacks ({type(e).__name__})"
        )
        return
    computed: list[bytes] = []
    found_problem = False
    for name, prefix in zip(names, prefixes, strict=True):
        values = stored_rows.get(name)
        if values is None:
            report.problems.append(f"deleted: event {name} ({where} inserted it)")
            found_problem = True
            continue
        leaf = chain.stored_leaf(values, cols)
        if leaf is None or leaf[: chain.LEAF_HEX // 2].hex() != prefix:
            report.problems.append(f"forged: event {name} ({where}): its row is not the one recorded")
            found_problem = True
            continue
        computed.append(leaf)
    keyed = keying.keyed(int(index))
    if found_problem or previous is None or (keyed and keying.key is None):
        return
    try:
        head = chain.header(
            str(collector),
            int(index),
            int(position),
            str(batch),
            chain.time_text(committed),
            cols,
            len(names),
            keyed=keyed,
        )
    except (TypeError, ValueError):
        head = b""
    if chain.digest(previous, head, computed, keying.key if keyed else None) != stored:
        report.problems.append(
            f"forged: {where}: its batch row or its order does not match its digest"
            " (chained to the one before)"
        )


@dataclass(frozen=True, slots=True)
class Keying:
    """How a collector's batches are keyed: from `first_index` on (None: never), under `key` (None:
    not held, or its registration does not verify: those digests cannot be checked)."""

    first_index: int | None = None
    key: bytes | None = None

    def keyed(self, index: int) -> bool:
        return self.first_index is not None and index >= self.first_index


def _collector(conn: Connection, collector: str, report: ChainReport, keying: Keying) -> list[str]:
    """Walk one collector's chain; give back its stored digests in order (for anchor checks)."""
    previous: str | None = chain.genesis(collector, chain.legacy_batches(conn, collector))
    expected = 1
    digests: list[str] = []
    last: Head | None = None
    for row in _batches(conn, collector):
        index = int(row[4])
        where = f"batch #{index} of {collector}"
        if index < expected:
            report.problems.append(f"forged: {where}: a second batch claims this place in the chain")
            continue
        for gone in range(expected, index):
            report.problems.append(f"missing: batch #{gone} of {collector} was removed")
            previous = None  # the link before is unknown; the gap itself is the finding
        _check_batch(conn, where, row, previous, report, keying)
        report.batches += 1
        previous = str(row[5])
        expected = index + 1
        digests.append(previous)
        last = Head(collector, index, previous)
    if last is not None:
        report.heads.append(last)
        below = last.index if keying.first_index is None else min(last.index, keying.first_index - 1)
        if below > 0:
            report.unkeyed.append((collector, below))
    return digests


def _outside(conn: Connection, report: ChainReport) -> None:
    """Events no chained batch inserted, against the number recorded before the chain began."""
    if conn.dialect.name == "sqlite":  # NOT IN builds one temporary index of the members
        members = "SELECT j.value FROM batches b, json_each(b.event_ids) j WHERE b.event_ids IS NOT NULL"
        outside = f"FROM events WHERE event_id NOT IN ({members})"
    else:  # an anti-join PostgreSQL can hash and spill (NOT IN over a large set would not be hashed)
        members = (
            "SELECT jsonb_array_elements_text(b.event_ids::jsonb) AS id FROM batches b"
            " WHERE b.event_ids IS NOT NULL"
        )
        outside = f"FROM events e WHERE NOT EXISTS (SELECT 1 FROM ({members}) m WHERE m.id = e.event_id)"
    legacy = conn.exec_driver_sql(
        "SELECT COALESCE(SUM(new), 0) FROM batches WHERE chain_index IS NULL"
    ).scalar()
    report.legacy_events = int(legacy or 0)
    count = int(conn.exec_driver_sql(f"SELECT count(*) {outside}").scalar() or 0)
    if report.legacy_events == 0:
        sql = f"SELECT event_id {outside} ORDER BY event_id LIMIT {MAX_NAMED}"
        for (name,) in conn.exec_driver_sql(sql):
            report.problems.append(f"inserted: event {name} was inserted by no batch of the chain")
        if count > MAX_NAMED:
            report.problems.append(f"inserted: {count - MAX_NAMED} more events outside the chain")
    elif count > report.legacy_events:
        report.problems.append(
            f"inserted: {count - report.legacy_events} events outside the chain beyond the"
            f" {report.legacy_events} recorded before it began"
        )
    elif count < report.legacy_events:
        report.problems.append(
            f"deleted: {report.legacy_events - count} of the {report.legacy_events} events recorded"
            " before the chain began are gone"
        )


def verify_chain(
    conn: Connection,
    anchors: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    keys: Mapping[str, bytes] | None = None,
) -> ChainReport:
    """Re-derive every chain with the collectors' `keys` (`storage.chain.keys`); each `anchors` digest
    (a head printed earlier) must still be in one. A keyed collector whose key is not held is refused."""
    report = ChainReport()
    keys = keys or {}
    collectors = [
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT DISTINCT collector FROM batches WHERE chain_index IS NOT NULL ORDER BY collector"
        )
    ]
    keyings = _registrations(conn, collectors, keys, report)
    known: set[str] = set()
    for collector in collectors:
        known.update(_collector(conn, collector, report, keyings.get(collector, Keying())))
        if progress:
            progress(report.batches)
    _outside(conn, report)
    _claimed_twice(conn, report)
    _payloads_gone(conn, report)
    _positions(conn, report)
    for anchor in anchors:
        if anchor.strip().lower() not in known:
            report.problems.append(
                f"truncated: head {anchor} is no longer in any chain"
                " (batches were removed or rewritten since it was printed)"
            )
    return report


def _registrations(
    conn: Connection, collectors: Sequence[str], keys: Mapping[str, bytes], report: ChainReport
) -> dict[str, Keying]:
    """Each registered collector's keying, its registration checked with the key held; the seal of
    what no key covers compared with the Ledger now (see `storage.chain.seal`)."""
    registered = chain_seal.registrations(conn)
    keyings: dict[str, Keying] = {}
    for collector, reg in sorted(registered.items()):
        key = keys.get(collector)
        if key is None:
            report.problems.append(
                f"refused: collector {collector}: its chain is keyed and this verify holds no key for it"
                " (FLIGHTLOG_HOME/chain-keys of the machine that wrote it)"
            )
        elif not reg.verifies(key):
            report.problems.append(
                f"forged: collector {collector}'s key registration does not verify with its key"
                " (its key, where its keyed part begins or its seal was changed)"
            )
            key = None
        keyings[collector] = Keying(reg.first_index, key)
    for collector in collectors:
        if collector not in registered and collector in keys:
            report.problems.append(
                f"forged: collector {collector}'s key registration is gone (its key is held here)"
            )
    if registered:
        now = chain_seal.seal_now(conn)
        lines = {line for reg in registered.values() for line in chain_seal.seal_changes(reg.seal, now)}
        report.problems.extend(sorted(lines))
    return keyings


def _claimed_twice(conn: Connection, report: ChainReport) -> None:
    """An event named by more than one batch of the chain (a leaf covers exactly one event, once)."""
    if conn.dialect.name == "sqlite":
        members = (
            "SELECT j.value AS id FROM batches b, json_each(b.event_ids) j WHERE b.event_ids IS NOT NULL"
        )
    else:
        members = (
            "SELECT jsonb_array_elements_text(b.event_ids::jsonb) AS id FROM batches b"
            " WHERE b.event_ids IS NOT NULL"
        )
    sql = f"SELECT id, count(*) FROM ({members}) m GROUP BY id HAVING count(*) > 1 ORDER BY id"
    for name, times in conn.exec_driver_sql(f"{sql} LIMIT {MAX_NAMED}"):
        report.problems.append(
            f"forged: event {name} is claimed by {times} batches (a leaf covers one event once)"
        )


def _payloads_gone(conn: Connection, report: ChainReport) -> None:
    """An event that says it holds its payload (`complete`, `partial`) whose blob row is gone."""
    sql = (
        "SELECT e.event_id, e.payload_sha256 FROM events e WHERE e.payload_sha256 IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = e.payload_sha256)"
        f" ORDER BY e.event_id LIMIT {MAX_NAMED}"
    )
    for name, sha in conn.exec_driver_sql(sql):
        report.problems.append(f"deleted: the payload of event {name} (blob {sha[:16]}) is gone")


def _positions(conn: Connection, report: ChainReport) -> None:
    """A collector's delivered position is its newest batch's (positions only move forward with
    the batch rows they account for): another value was written past flightlog."""
    sql = (
        "SELECT p.collector, p.position,"
        " (SELECT MAX(b.position) FROM batches b WHERE b.collector = p.collector)"
        " FROM positions p ORDER BY p.collector"
    )
    for collector, position, last in conn.exec_driver_sql(sql):
        if last is None or int(position) != int(last):
            report.problems.append(
                f"forged: collector {collector}'s delivered position ({position}) is not its newest"
                f" batch's ({last})"
            )
