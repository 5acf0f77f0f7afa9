"""Signed chain heads beside today's MACed chain, in one run: signing cost per batch, verify speed.

    python -m bench signing [--batches N] [--per-batch N]

Two SQLite Ledgers take the same batches, one MACed (HMAC chain keys, as before signatures) and one
signed (Ed25519 per batch): the time of the link's work per batch (the digest, plus the signature),
the append rate, and `verify`'s chain re-derivation in events per second, printed side by side
with the signed/MACed ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from storage.chain.keys import ChainKeys
from storage.chain.rederive import verify_chain
from storage.chain.signing import LedgerKeys
from storage.chain.verify import trusted_roots
from storage.ledger import Ledger, open_ledger
from tests.storage.factory import batch, event


def _fill(ledger: Ledger, batches: int, per: int) -> float:
    started = time.perf_counter()
    for b in range(batches):
        ledger.append(batch([event(b * per + i, payload=None) for i in range(per)], position=b + 1))
    return time.perf_counter() - started


def _verify(ledger: Ledger) -> tuple[float, int]:
    held = ledger.keys.held() if ledger.keys is not None else {}
    roots = trusted_roots(ledger)
    best = float("inf")
    for _ in range(3):  # the best of three: a shared machine's other work is not the chain's cost
        started = time.perf_counter()
        with ledger.engine.connect() as conn:
            report = verify_chain(conn, keys=held, roots=roots)
        assert report.ok, report.problems
        best = min(best, time.perf_counter() - started)
    return best, report.chained_events


def _sign_cost(keys: LedgerKeys, n: int) -> tuple[float, float]:
    """Per batch: an HMAC digest's key step vs an Ed25519 signature (the work signing adds)."""
    import hashlib
    import hmac

    signer = keys.signer("bench")
    digest = hashlib.sha256(b"x").hexdigest()
    started = time.perf_counter()
    for _ in range(n):
        hmac.new(b"k" * 32, digest.encode(), hashlib.sha256).hexdigest()
    mac = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for _ in range(n):
        signer.sign_head(digest)
    return mac, (time.perf_counter() - started) / n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench signing")
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--per-batch", type=int, default=25)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-signing-") as tmp:
        root = Path(tmp)
        rows = {}
        for name, keys in (
            ("maced", ChainKeys(root / "home-mac")),
            ("signed", LedgerKeys(root / "home-sig")),
        ):
            ledger = open_ledger(f"sqlite:///{root / name}.db", keys=keys)
            took = _fill(ledger, args.batches, args.per_batch)
            seconds, events = _verify(ledger)
            rows[name] = (took / args.batches * 1e6, events / seconds)
            ledger.close()
        mac, sig = _sign_cost(LedgerKeys(root / "home-sig"), 2000)
    print(f"{args.batches} batches of {args.per_batch} events, SQLite")
    print(f"{'':8} {'append us/batch':>16} {'verify events/s':>16}")
    for name, (append, speed) in rows.items():
        print(f"{name:8} {append:16.0f} {speed:16.0f}")
    print(f"key step per batch: HMAC {mac * 1e6:.1f} us, Ed25519 sign {sig * 1e6:.1f} us")
    print(
        f"ratios signed/maced: append time {rows['signed'][0] / rows['maced'][0]:.2f},"
        f" verify speed {rows['signed'][1] / rows['maced'][1]:.2f}, key step {sig / mac:.1f}"
    )


if __name__ == "__main__":
    main()
