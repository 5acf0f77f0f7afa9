"""One checkpoint: where every collector's chain stood at a moment, signed.

The idea of Certificate Transparency's signed tree heads: a writer who could later rewrite its own
Ledger (it holds the database and its keys) first hands what the Ledger held to someone it cannot
make forget (a witness, `storage.witness.stores`). Whatever it rewrites afterwards no longer matches
a checkpoint it published; what it appends after the last one is an unwitnessed tail, named as such.

The body, canonical JSON: the version, the time (UTC), every collector's head `[index, digest,
events]`, the totals, who signed it (`signer`: a collector, whose key the Ledger registers, or
`root`, the operator's root key, `ledger checkpoint` by hand) with its public key, and the root's
public key. The signature covers the body (`storage.chain.signing.signed_text("checkpoint", ...)`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy.engine import Connection

from storage.chain.signing import Signer, public_hex, sign, signed_text, verifies
from storage.errors import StorageError
from storage.sqlite_setup import sqlite_time

VERSION: Final = "flightlog-checkpoint/1"
ROOT: Final = "root"


class BadCheckpoint(StorageError):
    """What a witness gave back is not a checkpoint flightlog made."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint as published: its body and the signature over it."""

    body: dict[str, Any]
    signature: str

    @property
    def at(self) -> str:
        return str(self.body["at"])

    @property
    def signer(self) -> str:
        return str(self.body["signer"])

    @property
    def key(self) -> str:
        return str(self.body["key"])

    @property
    def root(self) -> str:
        return str(self.body["root"])

    def heads(self) -> dict[str, tuple[int, str, int]]:
        """collector -> (index, digest, events up to it)."""
        return {c: (int(h[0]), str(h[1]), int(h[2])) for c, h in self.body["heads"].items()}

    def signed(self) -> bool:
        """Whether the key the body names made the signature (trusting that key is apart)."""
        return verifies(self.key, self.signature, signed_text("checkpoint", self.body))

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.body, "signature": self.signature}

    def line(self) -> str:
        """One line of JSON: how it is published and printed."""
        return json.dumps(self.to_json(), separators=(",", ":"), sort_keys=True)


def parse(value: Any) -> Checkpoint:
    """A checkpoint from its JSON form; `BadCheckpoint` for anything else."""
    try:
        body, signature = value["checkpoint"], value["signature"]
        if body["version"] != VERSION or not isinstance(signature, str):
            raise BadCheckpoint(f"not a {VERSION} checkpoint")
        for name in ("at", "signer", "key", "root"):
            if not isinstance(body[name], str):
                raise BadCheckpoint(f"a checkpoint's {name} is not text")
        made = Checkpoint(dict(body), signature)
        made.heads()
        return made
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadCheckpoint(f"not a flightlog checkpoint ({type(e).__name__}: {e})") from e


def heads_now(conn: Connection) -> dict[str, list[Any]]:
    """Every collector's newest chained batch: [index, digest, events its chain inserted up to it]."""
    sql = (
        "SELECT b.collector, b.chain_index, b.digest, t.events FROM batches b JOIN"
        " (SELECT collector, MAX(chain_index) AS top, SUM(new) AS events FROM batches"
        " WHERE chain_index IS NOT NULL GROUP BY collector) t"
        " ON t.collector = b.collector AND t.top = b.chain_index ORDER BY b.collector"
    )
    return {str(c): [int(i), str(d), int(n)] for c, i, d, n in conn.exec_driver_sql(sql)}


def make(conn: Connection, signer: Signer | None, root_public: str, sign_as_root: Any = None) -> Checkpoint:
    """A checkpoint of the Ledger as `conn` sees it, signed by the collector `signer` (its key must
    be the one the Ledger registers) or, with `sign_as_root` (the root's private key), by the root."""
    heads = heads_now(conn)
    body: dict[str, Any] = {
        "version": VERSION,
        "at": sqlite_time(datetime.now(UTC)),
        "heads": heads,
        "batches": sum(h[0] for h in heads.values()),
        "events": sum(h[2] for h in heads.values()),
        "root": root_public,
    }
    if sign_as_root is not None:
        body |= {"signer": ROOT, "key": public_hex(sign_as_root)}
        return Checkpoint(body, sign(sign_as_root, signed_text("checkpoint", body)))
    if signer is None:
        raise StorageError("a checkpoint needs a signer: a registered collector or the root")
    body |= {"signer": signer.collector, "key": signer.public}
    return Checkpoint(body, sign(signer.key, signed_text("checkpoint", body)))
