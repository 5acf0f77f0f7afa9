"""How the tamper tests rewrite a ledger behind flightlog's back, as an attacker would.

SQLite: the `sqlite3` command-line client (its own connection, default settings), after dropping
whatever trigger stands in the way. PostgreSQL: a superuser session with
`session_replication_role = replica`, which switches every trigger off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import make_url

from storage.ledger import Ledger

PROBLEM_PREFIXES = ("forged:", "deleted:", "inserted:", "missing:", "truncated:", "refused:")


def sqlite3_cli(db: Path, sql: str) -> subprocess.CompletedProcess[str]:
    """Run SQL through the `sqlite3` CLI (no flightlog pragma, no flightlog code)."""
    binary = shutil.which("sqlite3")
    assert binary, "the sqlite3 CLI is needed (apt-get install sqlite3)"
    return subprocess.run([binary, str(db), sql], capture_output=True, text=True, timeout=30)


def pg_superuser(url: str, sql: str) -> None:
    """Run SQL as the PostgreSQL superuser with every trigger off (session_replication_role)."""
    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)  # libpq keeps ?options=
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(sql.encode())


class Tamperer:
    """Rewrites one ledger past its triggers, on whichever engine it is."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite")
        self.db = Path(make_url(url).database or "") if self.sqlite else None

    def run(self, sql: str, *, drop: tuple[str, ...] = ()) -> None:
        """Execute `sql`; on SQLite drop the named triggers first (on PostgreSQL all are off)."""
        if self.db is not None:
            drops = "".join(f"DROP TRIGGER IF EXISTS {t};" for t in drop)
            done = sqlite3_cli(self.db, drops + sql)
            assert done.returncode == 0, done.stderr
        else:
            pg_superuser(self.url, sql)


def held(ledger: Ledger) -> dict[str, bytes]:
    """The chain keys the Ledger was written with (the test's FLIGHTLOG_HOME)."""
    return ledger.keys.held() if ledger.keys is not None else {}


def verify_cli(url: str, blobs: str, *args: str, home: str | None = None) -> tuple[int, list[str], str]:
    """`flightlog ledger verify` as a user runs it, on the machine that wrote the Ledger (its
    FLIGHTLOG_HOME holds the chain keys; `home` names another): exit code, problem lines, stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTLOG_")}
    env["FLIGHTLOG_HOME"] = home or os.environ["FLIGHTLOG_HOME"]
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "ledger", "verify", "--ledger", url, "--blobs", blobs, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith(PROBLEM_PREFIXES)]
    return done.returncode, lines, done.stdout


def heads(stdout: str) -> dict[str, str]:
    """collector -> head digest, from verify's `head COLLECTOR #N DIGEST` lines."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("head "):
            _, collector, _index, digest = line.split(" ")
            found[collector] = digest
    return found


def roots(ledger: Ledger) -> set[str]:
    """The root keys the test's FLIGHTLOG_HOME trusts (its own root, once a collector registered)."""
    from storage.chain.verify import trusted_roots

    return trusted_roots(ledger)


def signing_key(ledger: Ledger, collector: str) -> Ed25519PrivateKey:
    """A collector's Ed25519 signing key, as the machine that wrote the Ledger holds it."""
    from storage.chain.signing import LedgerKeys

    assert isinstance(ledger.keys, LedgerKeys)
    return ledger.keys.signer(collector).key


def rechain(
    ledger: Ledger,
    tamper: Tamperer,
    collector: str,
    start: int,
    *,
    sign_with: Ed25519PrivateKey | None = None,
    mac: bytes | None = None,
) -> None:
    """What an attacker who knows the algorithm does after changing rows: recompute the leaves and
    digests of `collector`'s batch `start` and every later one, so each link checks out again; a
    signed batch is signed again with `sign_with` when the attacker holds a key (else it keeps the
    signature it had), a MACed one keyed with `mac` (else plain digests, all it can make)."""
    import json

    from storage.chain import links as chain
    from storage.chain.signing import head_text, sign

    with ledger.engine.connect() as conn:
        first = conn.exec_driver_sql(
            f"SELECT first_index FROM signing_keys WHERE collector = '{collector}'"
        ).scalar()
        rows = conn.exec_driver_sql(
            "SELECT batch_id, position, committed_at, chain_index, digest, event_ids, event_columns,"
            f" signature FROM batches WHERE collector = '{collector}' AND chain_index IS NOT NULL"
            " ORDER BY chain_index"
        ).all()
        previous = chain.genesis(collector, chain.legacy_batches(conn, collector))
        for batch_id, position, committed, index, digest, ids, columns, signature in rows:
            if index >= start:
                names, cols = json.loads(ids), columns.split(",")
                stored = chain.stored_rows(conn, names, cols)
                names = [n for n in names if n in stored]
                leaves = [chain.stored_leaf(stored[n], cols) or b"" for n in names]
                signed = first is not None and index >= first
                head = chain.header(
                    collector, index, position, batch_id, chain.time_text(committed), cols, len(names),
                    keyed=mac is not None and not signed, signed=signed,
                )  # fmt: skip
                digest = chain.digest(previous, head, leaves, None if signed else mac)
                if signed and sign_with is not None:
                    signature = sign(sign_with, head_text(digest))
                prefixes = "".join(leaf[:8].hex() for leaf in leaves)
                marked = "NULL" if signature is None else f"'{signature}'"
                tamper.run(
                    f"UPDATE batches SET digest = '{digest}', event_leaves = '{prefixes}',"
                    f" event_ids = '{json.dumps(names)}', new = {len(names)}, signature = {marked}"
                    f" WHERE batch_id = '{batch_id}'",
                    drop=("batches_no_update",),
                )
            previous = digest
