"""Keyed chains begin: each collector's key registration, and the seal of what came before.

A collector's first keyed batch registers it in `chain_keys`: its key's id, the index of its first
keyed batch (the batches before it, written before keyed chains existed, stay as they were) and the
**seal**: what the Ledger held that no key covers, at that moment. The registration is MACed with
the collector's key, so no one without the key can move where its keyed part begins, swap its key
for another, or change the seal.

The seal names every batch row from before the chain (no chain index: their batch ids, positions
and counts, as one digest) and every collector's unkeyed chain (its newest unkeyed index and
digest). Nothing may be added to either once keyed chains began, so every registration carries the
same seal (the first computes it, the others copy it) and `ledger verify` recomputes it: a pre-chain
batch row written afterwards, a new collector whose chain was computed without a key, an unkeyed
chain grown or rewritten afterwards, each differs from the seal and is named.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage.chain.keys import key_id
from storage.errors import StorageError

VERSION: Final = "flightlog-chain/2"
"""The keyed chain's version: in every keyed batch's header and in every registration's MAC."""
_NO_LIMIT: Final = 2**62


@dataclass(frozen=True, slots=True)
class Registration:
    """A collector's registration row."""

    collector: str
    key_id: str
    first_index: int
    seal: str
    mac: str

    def verifies(self, key: bytes) -> bool:
        """Whether `key` is the registered one and made this row's MAC."""
        expected = registration_mac(key, self.collector, self.first_index, self.seal)
        return self.key_id == key_id(key) and hmac.compare_digest(expected, self.mac)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, sort_keys=True)


def registration_mac(key: bytes, collector: str, first_index: int, seal: str) -> str:
    text = _dumps([VERSION, "register", collector, key_id(key), first_index, seal])
    return hmac.new(key, text.encode("ascii"), hashlib.sha256).hexdigest()


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


def registrations(conn: Connection) -> dict[str, Registration]:
    """Every collector's registration, by collector."""
    sql = "SELECT collector, key_id, first_index, seal, mac FROM chain_keys"
    return {
        str(r[0]): Registration(str(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]))
        for r in conn.exec_driver_sql(sql)
    }


def seal_now(conn: Connection) -> dict[str, Any]:
    """What no key covers now: the pre-chain batch rows (count and digest) and each collector's
    unkeyed chain head (the batches below its registered first keyed index, or all, unregistered)."""
    legacy = sorted(
        [str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4])]
        for r in conn.exec_driver_sql(
            "SELECT batch_id, collector, position, received, new FROM batches WHERE chain_index IS NULL"
        )
    )
    heads = conn.exec_driver_sql(  # unkeyed: below the MAC registration, else below the signed one
        "SELECT b.collector, MAX(b.chain_index) FROM batches b LEFT JOIN chain_keys k"
        " ON k.collector = b.collector LEFT JOIN signing_keys s ON s.collector = b.collector"
        " WHERE b.chain_index IS NOT NULL"
        f" AND b.chain_index < COALESCE(k.first_index, s.first_index, {_NO_LIMIT}) GROUP BY b.collector"
    ).all()
    chains: dict[str, list[Any]] = {}
    m = _mark(conn)
    for collector, index in heads:
        found = conn.exec_driver_sql(
            f"SELECT digest FROM batches WHERE collector = {m} AND chain_index = {m}", (collector, index)
        ).scalar()
        chains[str(collector)] = [int(index), str(found)]
    digest = hashlib.sha256(_dumps(legacy).encode("ascii")).hexdigest()
    return {"version": VERSION, "pre_chain_batches": [len(legacy), digest], "unkeyed_chains": chains}


def register(conn: Connection, collector: str, key: bytes, first_index: int, now: Any) -> None:
    """The collector's registration, inside its first keyed batch's transaction: the seal copied
    from an earlier registration (it cannot have changed since), else computed now."""
    m = _mark(conn)
    earlier = conn.exec_driver_sql("SELECT seal FROM chain_keys ORDER BY registered_at LIMIT 1").scalar()
    seal = str(earlier) if earlier is not None else _dumps(seal_now(conn))
    mac = registration_mac(key, collector, first_index, seal)
    conn.exec_driver_sql(
        f"INSERT INTO chain_keys (collector, key_id, first_index, seal, mac, registered_at)"
        f" VALUES ({m}, {m}, {m}, {m}, {m}, {m})",
        (collector, key_id(key), first_index, seal, mac, now),
    )


def check_key(collector: str, registered: str | None, key: bytes | None) -> None:
    """A collector writes with the key it registered, or (never registered) none: anything else would
    extend its chain with digests no verifier could accept."""
    if registered is None:
        return
    if key is None:
        raise StorageError(f"collector {collector} writes keyed batches: it cannot write without its key")
    if key_id(key) != registered:
        raise StorageError(
            f"the chain key held for collector {collector} (id {key_id(key)}) is not the one the Ledger"
            f" registered (id {registered}): restore FLIGHTLOG_HOME/chain-keys from where it ran before"
        )


def seal_changes(sealed: str, now: dict[str, Any]) -> list[str]:
    """One line per difference between a registration's seal and the Ledger now."""
    try:
        then = json.loads(sealed)
        batches_then, chains_then = then["pre_chain_batches"], then["unkeyed_chains"]
    except (ValueError, KeyError, TypeError):
        return ["forged: the seal of the Ledger before keyed chains is unreadable"]
    lines = []
    if batches_then != now["pre_chain_batches"]:
        lines.append(
            "inserted: a batch row from before the chain was added, removed or rewritten after keyed"
            f" chains began (then {batches_then[0]} rows, now {now['pre_chain_batches'][0]})"
        )
    for collector in sorted(set(chains_then) | set(now["unkeyed_chains"])):
        was, is_ = chains_then.get(collector), now["unkeyed_chains"].get(collector)
        if was is None:
            lines.append(
                f"refused: collector {collector}: its chain is not keyed and it was not in the Ledger"
                " when keyed chains began (a chain anyone could compute)"
            )
        elif is_ is None:
            lines.append(f"deleted: collector {collector}'s unkeyed chain (#{was[0]}) is gone")
        elif was != is_:
            lines.append(
                f"forged: collector {collector}'s unkeyed chain changed after keyed chains began"
                f" (sealed at #{was[0]}, now #{is_[0]} {is_[1][:12]})"
            )
    return lines
