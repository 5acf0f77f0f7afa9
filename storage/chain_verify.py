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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from storage import chain

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
    conn: Connection, where: str, row: tuple[Any, ...], previous: str | None, report: ChainReport
) -> None:
    """One batch: its events still there and unchanged, and its digest re-derived from them (unless
    the batch before it is gone: `previous` None)."""
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
    if found_problem or previous is None:
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
        )
    except (TypeError, ValueError):
        head = b""
    if chain.digest(previous, head, computed) != stored:
        report.problems.append(
            f"forged: {where}: its batch row or its order does not match its digest"
            " (chained to the one before)"
        )


def _collector(conn: Connection, collector: str, report: ChainReport) -> list[str]:
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
        _check_batch(conn, where, row, previous, report)
        report.batches += 1
        previous = str(row[5])
        expected = index + 1
        digests.append(previous)
        last = Head(collector, index, previous)
    if last is not None:
        report.heads.append(last)
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
    conn: Connection, anchors: Sequence[str] = (), progress: Callable[[int], None] | None = None
) -> ChainReport:
    """Re-derive every chain; each `anchors` digest (a head printed earlier) must still be in one."""
    report = ChainReport()
    collectors = [
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT DISTINCT collector FROM batches WHERE chain_index IS NOT NULL ORDER BY collector"
        )
    ]
    known: set[str] = set()
    for collector in collectors:
        known.update(_collector(conn, collector, report))
        if progress:
            progress(report.batches)
    _outside(conn, report)
    for anchor in anchors:
        if anchor.strip().lower() not in known:
            report.problems.append(
                f"truncated: head {anchor} is no longer in any chain"
                " (batches were removed or rewritten since it was printed)"
            )
    return report
