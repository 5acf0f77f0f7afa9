"""A Ledger written with MACed chains (as flightlog wrote them before signatures) keeps verifying
once its collectors sign, on SQLite and PostgreSQL: the first signed registration seals the MACed
part under the root's signature, so a verifier holding public keys only checks it too."""

from __future__ import annotations

from pathlib import Path

from storage.chain.keys import ChainKeys
from storage.chain.signing import LedgerKeys
from storage.chain.verify import verify
from storage.ledger import open_ledger
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer, rechain


def mac_then_signed(ledger_url: str, tmp_path: Path) -> tuple[str, LedgerKeys]:
    """Two collectors, two MACed batches each (the real MAC writer), then `test` writes signed."""
    home = tmp_path / "home"
    blobs = (tmp_path / "blobs").as_uri()
    old = open_ledger(ledger_url, blobs, keys=ChainKeys(home))
    for collector, first in (("test", 0), ("other", 100)):
        for b in range(2):
            ids = range(first + 3 * b, first + 3 * b + 3)
            old.append(
                batch([event(i, collector=collector) for i in ids], position=b + 1, collector=collector)
            )
    old.close()
    keys = LedgerKeys(home)
    new = open_ledger(ledger_url, blobs, keys=keys)
    new.append(batch([event(i) for i in range(6, 9)], position=3))
    new.close()
    return blobs, keys


def test_a_maced_ledger_verifies_after_signing_without_its_mac_keys(ledger_url: str, tmp_path: Path) -> None:
    """After the first signed batch, verify with no MAC key at all and only the root's public key is
    ok: both collectors' MACed batches are named as sealed, `test` as signed from #3."""
    blobs, keys = mac_then_signed(ledger_url, tmp_path)
    ledger = open_ledger(ledger_url, blobs, keys=keys)
    root = keys.root_public()
    assert root is not None
    report = verify(ledger, keys={}, roots=[root])
    assert report.ok, report.chain.problems
    assert sorted(report.chain.sealed) == [("other", 2), ("test", 2)]
    assert [(c, i) for c, i, _ in report.chain.signed] == [("test", 3)]
    ledger.close()


def test_a_maced_part_rewritten_with_its_mac_key_breaks_the_signed_seal(
    ledger_url: str, tmp_path: Path
) -> None:
    """Whoever holds the database and a MAC key rewrites a MACed row and recomputes its MACs: the
    MACs check out, but the signed seal of the MACed part does not, and verify names it."""
    blobs, keys = mac_then_signed(ledger_url, tmp_path)
    ledger = open_ledger(ledger_url, blobs, keys=keys)
    tamper = Tamperer(ledger_url)
    tamper.run(
        "UPDATE events SET status = 299 WHERE event_id = 'ev-000101'",
        drop=("events_no_update",),
    )
    rechain(ledger, tamper, "other", 1, mac=keys.mac.held()["other"])
    root = keys.root_public()
    assert root is not None
    report = verify(ledger, keys=keys.mac.held(), roots=[root])
    assert not report.ok
    assert report.chain.problems == [
        "forged: collector other's chain from before signatures changed after signed chains began"
        " (sealed at #2, now #2)"
    ]
    ledger.close()
