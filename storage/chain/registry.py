"""Signed chains begin: each collector's public key registered under the root, and the seal of what
no signature covers.

A collector's first signed batch registers it in `signing_keys`: its Ed25519 public key, the index
of its first signed batch, the **seal** and the root's public key, all signed by the root
(`storage.chain.signing`). The seal is what the Ledger held that no signature covers, when the first
collector registered: the batch rows from before the chain (count and digest), every collector's
unsigned chain (unkeyed or MACed: its head index and its **shadow**, a plain SHA-256 chain over the
same batch facts and event leaves, which anyone can recompute without a key), and the MAC
registrations of `chain_keys`. Every registration carries the same seal (the first computes it, the
others copy it); `ledger verify` recomputes it from the rows as stored. So a Ledger written with
today's MACed chains keeps verifying after its first signed batch, for a verifier without the MAC
keys too: nothing of its MACed part can change without changing the seal the root signed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage.chain import links as chain
from storage.chain.signing import VERSION, Signer, public_hex, sign, signed_text, verifies

SEAL_LOCK: Final = 0x666C7267  # "flrg": one registration at a time (PostgreSQL), so all copy one seal


@dataclass(frozen=True, slots=True)
class SignedRegistration:
    """A collector's row in `signing_keys`."""

    collector: str
    public_key: str
    first_index: int
    seal: str
    root_key: str
    signature: str

    def text(self) -> bytes:
        return registration_text(self.collector, self.public_key, self.first_index, self.seal)

    def verifies(self) -> bool:
        """Whether the root key the row names made its signature (trusting that root is apart)."""
        return verifies(self.root_key, self.signature, self.text())


def registration_text(collector: str, public: str, first_index: int, seal: str) -> bytes:
    return signed_text("register", [collector, public, first_index, seal])


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


def registrations(conn: Connection) -> dict[str, SignedRegistration]:
    """Every signed registration, by collector."""
    sql = "SELECT collector, public_key, first_index, seal, root_key, signature FROM signing_keys"
    return {
        str(r[0]): SignedRegistration(str(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), str(r[5]))
        for r in conn.exec_driver_sql(sql)
    }


def _digest(rows: Any) -> list[Any]:
    rows = sorted(rows)
    return [len(rows), hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()]


def pre_chain(conn: Connection) -> list[Any]:
    """The batch rows from before the chain: their count and a digest of them."""
    return _digest(
        [str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])]
        for r in conn.exec_driver_sql(
            "SELECT batch_id, collector, position, received, new FROM batches WHERE chain_index IS NULL"
        )
    )


def mac_registrations(conn: Connection) -> list[Any]:
    """The MAC registrations (`storage.chain.seal`), each row whole: their count and a digest."""
    return _digest(
        [str(c) for c in r]
        for r in conn.exec_driver_sql("SELECT collector, key_id, first_index, seal, mac FROM chain_keys")
    )


def shadow_step(previous: str, row: tuple[Any, ...], leaves: list[bytes], columns: list[str]) -> str:
    """One step of a shadow chain: the plain digest of one batch (`batch_id, collector, position,
    committed_at, chain_index`) over its events' leaves, as an unkeyed chain links them."""
    batch, collector, position, committed, index = row[:5]
    head = chain.header(
        str(collector),
        int(index),
        int(position),
        str(batch),
        chain.time_text(committed),
        columns,
        len(leaves),
    )
    return chain.digest(previous, head, leaves)


def _shadows(conn: Connection) -> Iterator[tuple[str, int, str]]:
    """Each collector's whole chain as it stands: (collector, head index, shadow digest)."""
    collectors = [
        str(r[0])
        for r in conn.exec_driver_sql(
            "SELECT DISTINCT collector FROM batches WHERE chain_index IS NOT NULL ORDER BY collector"
        )
    ]
    m = _mark(conn)
    for collector in collectors:
        shadow = chain.genesis(collector, chain.legacy_batches(conn, collector))
        index = 0
        sql = (
            "SELECT batch_id, collector, position, committed_at, chain_index, event_ids, event_columns"
            f" FROM batches WHERE collector = {m} AND chain_index IS NOT NULL ORDER BY chain_index"
        )
        for row in conn.exec_driver_sql(sql, (collector,)).all():
            names, columns = json.loads(row[5]), str(row[6]).split(",")
            stored = chain.stored_rows(conn, names, columns)
            leaves = [leaf for n in names if (leaf := chain.stored_leaf(stored.get(n, ()), columns))]
            shadow, index = shadow_step(shadow, tuple(row), leaves, columns), int(row[4])
        yield collector, index, shadow


def seal_now(conn: Connection) -> dict[str, Any]:
    """The seal of everything unsigned, computed from the rows (at the first registration only:
    it reads every chained event once)."""
    return {
        "version": VERSION,
        "pre_chain_batches": pre_chain(conn),
        "chains": {c: [i, s] for c, i, s in _shadows(conn)},
        "mac_registrations": mac_registrations(conn),
    }


def register(conn: Connection, signer: Signer, first_index: int, now: str) -> None:
    """The collector's signed registration, inside its first signed batch's transaction: the seal
    copied from an earlier registration (nothing unsigned can have been added since), else computed."""
    m = _mark(conn)
    if conn.dialect.name == "postgresql":
        chain.query(conn, "SELECT pg_advisory_xact_lock(%s)", (SEAL_LOCK,))
    earlier = chain.query(conn, "SELECT seal FROM signing_keys ORDER BY registered_at LIMIT 1")
    seal = (
        str(earlier[0][0]) if earlier else json.dumps(seal_now(conn), sort_keys=True, separators=(",", ":"))
    )
    root = signer.root()
    root_public = public_hex(root)
    signature = sign(root, registration_text(signer.collector, signer.public, first_index, seal))
    chain.query(
        conn,
        "INSERT INTO signing_keys (collector, public_key, first_index, seal, root_key, signature,"
        f" registered_at) VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m})",
        (signer.collector, signer.public, first_index, seal, root_public, signature, now),
    )


def seal_changes(sealed: str, now: dict[str, Any]) -> list[str]:
    """One line per difference between the signed seal and the Ledger now (`now` as `seal_now`
    gives it, each chain cut at its collector's first signed batch; a shadow that could not be
    recomputed, None, is left to the lines that name the rows)."""
    try:
        then = json.loads(sealed)
        batches_then, chains_then, macs_then = (
            then["pre_chain_batches"],
            then["chains"],
            then["mac_registrations"],
        )
    except (ValueError, KeyError, TypeError):
        return ["forged: the signed seal of what came before signatures is unreadable"]
    lines = []
    if batches_then != now["pre_chain_batches"]:
        lines.append(
            "inserted: a batch row from before the chain was added, removed or rewritten after signed"
            f" chains began (then {batches_then[0]} rows, now {now['pre_chain_batches'][0]})"
        )
    if macs_then != now["mac_registrations"]:
        lines.append("forged: the MAC key registrations changed after signed chains began")
    for collector in sorted(set(chains_then) | set(now["chains"])):
        was, is_ = chains_then.get(collector), now["chains"].get(collector)
        if was is None:
            lines.append(
                f"refused: collector {collector}: its chain is not signed and it was not in the Ledger"
                " when signed chains began"
            )
        elif is_ is None:
            lines.append(f"deleted: collector {collector}'s chain from before signatures (#{was[0]}) is gone")
        elif is_[1] is not None and was != is_:
            lines.append(
                f"forged: collector {collector}'s chain from before signatures changed after signed chains"
                f" began (sealed at #{was[0]}, now #{is_[0]})"
            )
    return lines
