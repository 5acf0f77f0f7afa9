"""The tamper table: kinds of change x where x who x witness, generated, on SQLite and PostgreSQL.

Every cell builds a Ledger of two collectors (`test`, `other`), three signed batches of two events
each, and, in the witnessed half, publishes a checkpoint to a witness file. Then it changes the
Ledger as someone holding the database would (SQLite's own client with the triggers dropped; a
PostgreSQL superuser with triggers off), at the first, middle or last batch of one collector or of
all, and covers the change as far as `who` can:

- `no key`: recomputes every digest after the change (signatures stay as they were: it cannot sign);
- `collector key`: holds `test`'s signing key too, re-signs `test`'s chain (not `other`'s);
- `forged collector`: brings a key and a root of its own: re-registers the changed collectors (or,
  appending, a new collector `ghost`) under them and signs with it;
- `root key`: holds the operator's root: re-registers the changed collectors with new keys, signed by
  the real root, and re-signs their whole chains.

`expected` says, per cell, whether verify finds it (not ok, a line naming the change) or whether it
is beyond what verify can see, as README's "What verify cannot see" says: a key holder's rewrite
without a witness, a removed tail without a witness (no key needed), and a key holder's appends
after the newest checkpoint, which verify names as the unwitnessed tail, never as verified.
The last test prints the table's counts (for the closing note).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from storage.chain import links as chain
from storage.chain.registry import registration_text
from storage.chain.signing import LedgerKeys, head_text, public_hex, sign
from storage.chain.verify import VerifyReport, verify
from storage.ledger import Ledger, open_ledger
from storage.rows import COLUMNS
from storage.witness.publisher import checkpoint_of, publish
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer, rechain

pytestmark = pytest.mark.slow

KINDS = ("edit", "delete", "insert", "drop batch", "truncate", "append")
WHERES = ("first", "middle", "last")
SCOPES = ("one collector", "all collectors")
WHOS = ("no key", "collector key", "forged collector", "root key")
INDEX = {"first": 1, "middle": 2, "last": 3}
FIRST = {"test": 0, "other": 100}
COLS = ", ".join(COLUMNS)
TRIGGERS = tuple(
    f"{t}_{w}"
    for t in ("events", "batches", "signing_keys")
    for w in ("no_update", "no_delete", "no_reinsert")
)
TABLE: Counter[tuple[str, str]] = Counter()
"""(expected, outcome) -> cells, over both engines, for the closing note."""


def cells() -> Iterator[tuple[str, str, str, str, bool]]:
    for kind, where, scope, who, witness in itertools.product(KINDS, WHERES, SCOPES, WHOS, (False, True)):
        if kind == "append" and where != "last":
            continue  # an append has one place: after the last batch
        yield kind, where, scope, who, witness


def expected(kind: str, where: str, scope: str, who: str, witness: bool) -> str:
    """`found`, `beyond` (verify ok: README names the class) or `tail` (verify ok, the change named
    as the unwitnessed tail)."""
    if kind == "truncate" or (kind == "drop batch" and where == "last"):
        return "found" if witness else "beyond"  # the rest of the chain is intact: no key needed
    if who in ("no key", "forged collector") or (who == "collector key" and scope == "all collectors"):
        return "found"  # a signature no registered key made, or a root this verify does not trust
    if kind == "append":
        return "tail" if witness else "beyond"
    return "found" if witness else "beyond"


@dataclass
class World:
    ledger: Ledger
    keys: LedgerKeys
    tamper: Tamperer
    witness: str


@pytest.fixture
def world(ledger_url: str, tmp_path: Path) -> Iterator[World]:
    keys = LedgerKeys(tmp_path / "home")
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri(), keys=keys)
    for collector, first in FIRST.items():
        for b in range(3):
            ids = range(first + 2 * b, first + 2 * b + 2)
            events = [event(i, payload=f"body {i}".encode(), collector=collector) for i in ids]
            ledger.append(batch(events, position=b + 1, collector=collector))
    yield World(ledger, keys, Tamperer(ledger_url), (tmp_path / "witness.jsonl").as_uri())
    ledger.close()


def sql(w: World, text: str) -> None:
    w.tamper.run(text, drop=TRIGGERS)


def ids_of(w: World, collector: str, index: int) -> list[str]:
    with w.ledger.engine.connect() as conn:
        found = conn.exec_driver_sql(
            f"SELECT event_ids FROM batches WHERE collector = '{collector}' AND chain_index = {index}"
        ).scalar()
    return json.loads(found) if found else []


def change(w: World, kind: str, collector: str, index: int) -> None:
    """The change itself, in the rows (no digest or signature touched yet)."""
    ids = ids_of(w, collector, index)
    where = f"collector = '{collector}'"
    if kind == "edit":
        sql(w, f"UPDATE events SET status = 599, url = 'https://evil.example/' WHERE event_id = '{ids[0]}'")
    elif kind == "delete":
        sql(w, f"DELETE FROM events WHERE event_id = '{ids[0]}'")
    elif kind == "insert":
        forged = f"{ids[0]}-forged"
        values = ", ".join(f"'{forged}'" if c == "event_id" else c for c in COLUMNS)
        sql(w, f"INSERT INTO events ({COLS}) SELECT {values} FROM events WHERE event_id = '{ids[0]}'")
        sql(
            w,
            f"UPDATE batches SET event_ids = '{json.dumps([*ids, forged])}'"
            f" WHERE {where} AND chain_index = {index}",
        )
    elif kind == "drop batch":
        among = ", ".join(f"'{i}'" for i in ids)
        sql(
            w,
            f"DELETE FROM events WHERE event_id IN ({among});"
            f" DELETE FROM batches WHERE {where} AND chain_index = {index}",
        )
        sql(w, f"UPDATE batches SET chain_index = chain_index - 1 WHERE {where} AND chain_index > {index}")
    elif kind == "truncate":
        for i in range(index, 4):
            among = ", ".join(f"'{e}'" for e in ids_of(w, collector, i))
            sql(w, f"DELETE FROM events WHERE event_id IN ({among})")
        sql(w, f"DELETE FROM batches WHERE {where} AND chain_index >= {index}")
    fix_positions(w)


def fix_positions(w: World) -> None:
    """What a careful attacker leaves: each collector's position its newest batch's."""
    sql(
        w,
        "DELETE FROM positions WHERE collector NOT IN (SELECT collector FROM batches);"
        " UPDATE positions SET position = (SELECT MAX(b.position) FROM batches b"
        " WHERE b.collector = positions.collector)",
    )


def reregister(w: World, collector: str, root: Ed25519PrivateKey) -> Ed25519PrivateKey:
    """Replace the collector's registration with a new key signed by `root` (the same seal)."""
    new = Ed25519PrivateKey.generate()
    with w.ledger.engine.connect() as conn:
        first, seal, at = conn.exec_driver_sql(
            f"SELECT first_index, seal, registered_at FROM signing_keys WHERE collector = '{collector}'"
        ).one()
    public = public_hex(new)
    signature = sign(root, registration_text(collector, public, int(first), str(seal)))
    sql(
        w,
        f"DELETE FROM signing_keys WHERE collector = '{collector}';"
        " INSERT INTO signing_keys (collector, public_key, first_index, seal, root_key, signature,"
        f" registered_at) VALUES ('{collector}', '{public}', {first}, '{seal}', '{public_hex(root)}',"
        f" '{signature}', '{at}')",
    )
    return new


def append(w: World, collector: str, key: Ed25519PrivateKey | None) -> None:
    """A forged batch after the collector's newest, signed with `key` (NULL without one)."""
    with w.ledger.engine.connect() as conn:
        top = conn.exec_driver_sql(
            f"SELECT chain_index, digest, position FROM batches WHERE collector = '{collector}'"
            " ORDER BY chain_index DESC LIMIT 1"
        ).one_or_none()
    index, previous, position = (int(top[0]), str(top[1]), int(top[2])) if top else (0, "", 0)
    if top is None:
        previous = chain.genesis(collector, [])
    forged = f"ev-forged-{collector}"
    values = ", ".join(
        f"'{forged}'" if c == "event_id" else f"'{collector}'" if c == "collector" else c for c in COLUMNS
    )
    sql(w, f"INSERT INTO events ({COLS}) SELECT {values} FROM events WHERE event_id = 'ev-000000'")
    with w.ledger.engine.connect() as conn:
        row = chain.stored_rows(conn, [forged], list(COLUMNS))[forged]
    leaf = chain.stored_leaf(row, list(COLUMNS))
    assert leaf is not None
    committed = "2026-12-01 12:00:00.000000"
    batch_id = f"forged-{collector}"
    head = chain.header(collector, index + 1, position + 1, batch_id, committed, COLUMNS, 1, signed=True)
    digest = chain.digest(previous, head, [leaf])
    signature = "NULL" if key is None else f"'{sign(key, head_text(digest))}'"
    stamp = committed if w.tamper.sqlite else f"{committed}+00"
    sql(
        w,
        "INSERT INTO batches (batch_id, collector, position, received, new, duplicates, conflicts, raw_bytes,"
        " stored_bytes, committed_at, chain_index, digest, event_ids, event_leaves, event_columns, signature)"
        f" VALUES ('{batch_id}', '{collector}', {position + 1}, 1, 1, 0, '[]', 0, 0, '{stamp}', {index + 1},"
        f" '{digest}', '{json.dumps([forged])}', '{leaf[:8].hex()}', '{','.join(COLUMNS)}', {signature})",
    )
    if top is None:
        sql(
            w, f"INSERT INTO positions (collector, position, updated_at) VALUES ('{collector}', 1, '{stamp}')"
        )
    else:
        fix_positions(w)


def attack(w: World, kind: str, where: str, scope: str, who: str) -> None:
    targets = ["test", "other"] if scope == "all collectors" else ["test"]
    attacker_root = Ed25519PrivateKey.generate()
    if kind == "append" and who == "forged collector":
        ghost = Ed25519PrivateKey.generate()  # a collector of its own, under a root of its own
        append(w, "ghost", ghost)
        first, seal = 1, "{}"
        signature = sign(attacker_root, registration_text("ghost", public_hex(ghost), first, seal))
        sql(
            w,
            "INSERT INTO signing_keys (collector, public_key, first_index, seal, root_key, signature,"
            f" registered_at) VALUES ('ghost', '{public_hex(ghost)}', 1, '{seal}',"
            f" '{public_hex(attacker_root)}',"
            f" '{signature}', '2026-12-01')",
        )
        return
    for collector in targets:
        if kind == "truncate" or (kind == "drop batch" and where == "last"):
            change(w, "truncate", collector, INDEX[where])  # what is left is intact: no key is needed
            continue
        key: Ed25519PrivateKey | None = None
        if who == "collector key" and collector == "test":
            key = w.keys.signer("test").key
        elif who == "forged collector":
            key = reregister(w, collector, attacker_root)
        elif who == "root key":
            key = reregister(w, collector, w.keys.root())
        if kind == "append":
            if who in ("forged collector", "root key"):  # a new registration: the whole chain signed again
                rechain(w.ledger, w.tamper, collector, 1, sign_with=key)
            append(w, collector, key)
            continue
        change(w, kind, collector, INDEX[where])
        start = 1 if who in ("forged collector", "root key") else INDEX[where]
        rechain(w.ledger, w.tamper, collector, start, sign_with=key)


def problems(report: VerifyReport) -> list[str]:
    lines = [*report.chain.problems, *(f"corrupted: {s}" for s in report.corrupted)]
    lines += [f"missing: {s}" for s in report.missing]
    return lines + (report.witness.problems if report.witness is not None else [])


@pytest.mark.parametrize(("kind", "where", "scope", "who", "witness"), list(cells()))
def test_tamper_table(world: World, kind: str, where: str, scope: str, who: str, witness: bool) -> None:
    """The cell's change is found (verify not ok, a line naming it), or it is of a class README names
    as beyond verify: then verify is ok and, with a witness, names the change as unwitnessed tail
    when it came after the checkpoint."""
    root = world.keys.root_public()
    assert root is not None
    witnesses = [world.witness] if witness else []
    if witness:
        publish(checkpoint_of(world.ledger), witnesses)
    before = verify(world.ledger, roots=[root], witnesses=witnesses)
    assert before.ok and not (before.witness and before.witness.tails), problems(before)
    attack(world, kind, where, scope, who)
    after = verify(world.ledger, roots=[root], witnesses=witnesses)
    want = expected(kind, where, scope, who, witness)
    got = (
        "found"
        if not after.ok and problems(after)
        else "tail"
        if after.witness and after.witness.tails
        else "beyond"
    )
    TABLE[(want, got)] += 1
    assert got == want, problems(after)
    if got == "tail":
        assert after.witness is not None
        changed = {"test", "other"} if scope == "all collectors" else {"test"}
        assert {t.collector for t in after.witness.tails} == changed


def test_zz_report_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Every cell came out as expected (the counts for the closing note; run with the table)."""
    cells_run = sum(TABLE.values())
    assert cells_run and all(want == got for want, got in TABLE), dict(TABLE)
    by = Counter({want: n for (want, _), n in TABLE.items()})
    with capsys.disabled():
        print(
            f"\ntamper table: {cells_run} cells: {by['found']} found, {by['tail']} named as unwitnessed tail,"
            f" {by['beyond']} beyond verify without a witness (README)"
        )
