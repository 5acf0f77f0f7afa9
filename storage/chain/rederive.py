"""Re-derive every collector's chain from the rows as stored, and say what does not fit.

Each finding is one line naming what happened: `forged` (an event's row, or a batch row, is not
what was recorded), `deleted` (an event a batch inserted is gone), `missing` (a batch of the chain
is gone), `inserted` (an event no batch of the chain inserted), `truncated` (a head digest the
operator kept is no longer in the chain: a tail was removed or the chain rewritten). This holds for
someone who dropped the triggers or is a database superuser; only rewriting a whole chain from the
tampered batch on escapes it, and that changes the head an operator anchored elsewhere.

Batches recorded before the chain existed (no digest) are counted, not chained: their events are
covered by their number, and their batch rows by the genesis digest each chain starts from.

Signed batches (`storage.chain.signing`) carry the collector's Ed25519 signature of their digest,
checked with the public key the Ledger registered for it under a root key the verifier trusts
(`storage.chain.registry`); what came before signatures is checked against the seal that root
signed, so MACed chains verify without their MAC keys once a collector signs.

Memory stays bounded: one batch's rows at a time; the events outside the chain are found in SQL.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from storage.chain import links as chain
from storage.chain import registry
from storage.chain import seal as chain_seal
from storage.chain.signing import head_text, short, verifies

MAX_NAMED = 1000
"""Events outside the chain named one per line; beyond that, one line counts the rest."""

_BATCH_COLUMNS = (
    "batch_id, collector, position, committed_at, chain_index, digest, event_ids, event_leaves,"
    " event_columns, signature"
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
    """(collector, its last unkeyed batch): batches #1 to it were written before keyed chains, and no
    signed seal covers them."""
    sealed: list[tuple[str, int]] = field(default_factory=list)
    """(collector, its last batch before signatures): batches #1 to it are bound by the signed seal."""
    signed: list[tuple[str, int, str]] = field(default_factory=list)
    """(collector, its first signed batch, its public key)."""
    roots: list[str] = field(default_factory=list)
    """The root keys the registrations are signed by (public, hex)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


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
) -> list[bytes] | None:
    """One batch: its events still there and unchanged, its digest re-derived from them (unless the
    batch before it is gone: `previous` None; or it is MACed and its key is not held), and a signed
    batch's signature checked with its collector's registered key. Gives back the events' leaves
    when every row is as recorded (for the shadow chain, `storage.chain.registry`), else None."""
    batch, collector, position, committed, index, stored, ids, leaves, columns, signature = row
    decoded = _decode(ids, leaves, columns)
    if decoded is None:
        report.problems.append(f"forged: {where}: its list of events is unreadable")
        return None
    names, prefixes, cols = decoded
    report.chained_events += len(names)
    try:
        stored_rows = chain.stored_rows(conn, names, cols)
    except Exception as e:  # an unknown column name: the batch row was rewritten
        report.problems.append(
            f"forged: {where}: it names columns the events table lacks ({type(e).__name__})"
        )
        return None
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
    if found_problem:
        return None
    mode = keying.mode(int(index))
    if (
        mode == "signed"
        and keying.public is not None
        and not verifies(keying.public, signature, head_text(str(stored)))
    ):
        report.problems.append(
            f"forged: {where}: its signature does not verify with {collector}'s registered key"
        )
    if previous is None or (mode == "mac" and keying.key is None):
        return computed
    try:
        head = chain.header(
            str(collector),
            int(index),
            int(position),
            str(batch),
            chain.time_text(committed),
            cols,
            len(names),
            keyed=mode == "mac",
            signed=mode == "signed",
        )
    except (TypeError, ValueError):
        head = b""
    if chain.digest(previous, head, computed, keying.key if mode == "mac" else None) != stored:
        report.problems.append(
            f"forged: {where}: its batch row or its order does not match its digest"
            " (chained to the one before)"
        )
    return computed


@dataclass(frozen=True, slots=True)
class Keying:
    """How a collector's batches are chained: MACed from `first_index` on (None: never) under `key`
    (None: not held, or its registration does not verify: those digests cannot be checked), and
    signed from `signed_from` on with the registered `public` key."""

    first_index: int | None = None
    key: bytes | None = None
    signed_from: int | None = None
    public: str | None = None

    def keyed(self, index: int) -> bool:
        return self.first_index is not None and index >= self.first_index

    def mode(self, index: int) -> str:
        """`signed`, `mac` or `plain`: how batch `index` was chained."""
        if self.signed_from is not None and index >= self.signed_from:
            return "signed"
        return "mac" if self.keyed(index) else "plain"


@dataclass
class Unsigned:
    """A collector's chain before its first signed batch: its last index and its shadow digest
    (None when a row of it is not as recorded: the lines naming those rows say so)."""

    index: int = 0
    shadow: str | None = None


def _collector(
    conn: Connection, collector: str, report: ChainReport, keying: Keying
) -> tuple[list[str], Unsigned]:
    """Walk one collector's chain; give back its stored digests in order (for anchor checks) and
    its part before signatures (for the signed seal)."""
    start = chain.genesis(collector, chain.legacy_batches(conn, collector))
    previous: str | None = start
    unsigned = Unsigned(0, start)
    expected = 1
    digests: list[str] = []
    last: Head | None = None
    unregistered = False
    for row in _batches(conn, collector):
        index = int(row[4])
        where = f"batch #{index} of {collector}"
        if index < expected:
            report.problems.append(f"forged: {where}: a second batch claims this place in the chain")
            continue
        for gone in range(expected, index):
            report.problems.append(f"missing: batch #{gone} of {collector} was removed")
            previous = None  # the link before is unknown; the gap itself is the finding
            unsigned.shadow = None if keying.mode(gone) != "signed" else unsigned.shadow
        if row[9] is not None and keying.signed_from is None and not unregistered:
            unregistered = True
            report.problems.append(
                f"forged: collector {collector}'s batches are signed by a key no registration names"
            )
        leaves = _check_batch(conn, where, row, previous, report, keying)
        if keying.mode(index) != "signed":
            unsigned.index = index
            if unsigned.shadow is not None and leaves is not None:
                unsigned.shadow = registry.shadow_step(
                    unsigned.shadow, tuple(row), leaves, str(row[8]).split(",")
                )
            else:
                unsigned.shadow = None
        report.batches += 1
        previous = str(row[5])
        expected = index + 1
        digests.append(previous)
        last = Head(collector, index, previous)
    if last is not None:
        report.heads.append(last)
    return digests, unsigned


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
    roots: Collection[str] = (),
) -> ChainReport:
    """Re-derive every chain, with the collectors' MAC `keys` (`storage.chain.keys`) for chains
    written before signatures, and the registrations' signatures checked against the `roots` this
    verify trusts (public keys, hex); each `anchors` digest (a head printed earlier) must still be
    in one. A collector registered under a root not trusted, or MACed with a key not held and no
    signed seal over it, is refused."""
    report = ChainReport()
    keys = keys or {}
    collectors = [
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT DISTINCT collector FROM batches WHERE chain_index IS NOT NULL ORDER BY collector"
        )
    ]
    signed = registry.registrations(conn)
    keyings = _registrations(conn, collectors, keys, report, sealed=bool(signed))
    _signed_registrations(signed, set(roots), keyings, report)
    known: set[str] = set()
    unsigned: dict[str, Unsigned] = {}
    for collector in collectors:
        keying = keyings.get(collector, Keying())
        digests, before = _collector(conn, collector, report, keying)
        known.update(digests)
        if before.index:
            unsigned[collector] = before
            if signed:
                report.sealed.append((collector, before.index))
            elif keying.first_index is None or keying.first_index > 1:
                below = (
                    before.index if keying.first_index is None else min(before.index, keying.first_index - 1)
                )
                if below > 0:
                    report.unkeyed.append((collector, below))
        if progress:
            progress(report.batches)
    if signed:
        now = {
            "pre_chain_batches": registry.pre_chain(conn),
            "chains": {c: [u.index, u.shadow] for c, u in unsigned.items()},
            "mac_registrations": registry.mac_registrations(conn),
        }
        first = min(signed.values(), key=lambda r: (r.first_index, r.collector))
        report.problems.extend(registry.seal_changes(first.seal, now))
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


def _signed_registrations(
    signed: Mapping[str, registry.SignedRegistration],
    roots: set[str],
    keyings: dict[str, Keying],
    report: ChainReport,
) -> None:
    """Each signed registration: made by the root it names, that root trusted, the same seal as the
    others; its collector's batches from its first index on are checked with its key."""
    seals = {r.seal for r in signed.values()}
    for collector, reg in sorted(signed.items()):
        if reg.root_key not in report.roots:
            report.roots.append(reg.root_key)
        if not reg.verifies():
            report.problems.append(
                f"forged: collector {collector}'s key registration is not signed by the root key it names"
            )
        elif reg.root_key not in roots:
            report.problems.append(
                f"refused: collector {collector} is registered under root key {short(reg.root_key)}, which"
                " this verify does not trust (--root-key, or run where FLIGHTLOG_HOME holds that root)"
            )
        if len(seals) > 1:
            report.problems.append(
                f"forged: collector {collector}'s registration carries another seal than the others"
            )
        keyings[collector] = dataclasses.replace(
            keyings.get(collector, Keying()), signed_from=reg.first_index, public=reg.public_key
        )
        report.signed.append((collector, reg.first_index, reg.public_key))


def _registrations(
    conn: Connection,
    collectors: Sequence[str],
    keys: Mapping[str, bytes],
    report: ChainReport,
    *,
    sealed: bool = False,
) -> dict[str, Keying]:
    """Each MAC-registered collector's keying, its registration checked with the key held; the seal
    of what no key covers compared with the Ledger now (see `storage.chain.seal`). Once signatures
    began (`sealed`), a MAC key not held is no refusal: the signed seal binds that part."""
    registered = chain_seal.registrations(conn)
    keyings: dict[str, Keying] = {}
    for collector, reg in sorted(registered.items()):
        key = keys.get(collector)
        if key is None and not sealed:
            report.problems.append(
                f"refused: collector {collector}: its chain is keyed and this verify holds no key for it"
                " (FLIGHTLOG_HOME/chain-keys of the machine that wrote it)"
            )
        elif key is not None and not reg.verifies(key):
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
