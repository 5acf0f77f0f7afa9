"""`verify`: re-derive the batch chain, decompress and re-hash stored payloads, and find what is
missing or orphaned.

Hashes are how tampering and bit rot are detected (triggers only catch bugs): every event row is
checked against its batch's chained digest (storage/chain/rederive.py), and every inline frame and
every stored object is decoded and its SHA-256 compared with its address.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from storage import codec, kinds
from storage.chain import registry
from storage.chain.rederive import ChainReport, verify_chain
from storage.chain.signing import LedgerKeys
from storage.errors import CorruptPayload, MissingPayload, StorageError
from storage.ledger import BLOBS, EVENTS, Ledger
from storage.retention.prune import check as check_prunes
from storage.retention.pruned import Pruned
from storage.witness.checkpoint import Checkpoint
from storage.witness.compare import WitnessReport, compare, signed_checkpoints
from storage.witness.stores import open_witness

Progress = Callable[[int, int], None]
"""Called with (checked, total) as payloads are checked."""


@dataclass
class VerifyReport:
    """What `verify` found; `ok` only when nothing is corrupted, missing or orphaned."""

    total: int = 0
    checked: int = 0
    bytes_checked: int = 0
    corrupted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    """Objects in the blob store that no blob row names (an upload whose batch never committed)."""
    unreferenced: list[str] = field(default_factory=list)
    """Blob rows no event points at."""
    chain: ChainReport = field(default_factory=ChainReport)
    witness: WitnessReport | None = None
    """What the witnesses' checkpoints say (`verify --witness`); None when none was named."""
    pruned: list[Pruned] = field(default_factory=list)
    """Payloads removed under signed prune records (not faults: told apart from missing ones)."""
    pruned_pending: list[str] = field(default_factory=list)
    """Pruned payloads whose bytes are still stored (a pruning cut short: `ledger erase` finishes it)."""
    lost: int = 0
    """Exchanges a proxy answered and could not record (its `capture.lost` events): said, not a
    fault of the Ledger's."""
    dropped: int = 0
    """Captured items dropped at a full queue (its `capture.overflow` events)."""

    @property
    def ok(self) -> bool:
        witnessed = self.witness is None or self.witness.ok
        return not (self.corrupted or self.missing or self.orphaned) and self.chain.ok and witnessed


def _still_stored(ledger: Ledger, location: str, data: bytes | None, sha: str) -> bool:
    if location == "inline":
        return bool(data)
    try:
        ledger.blobs.open(sha).close()
    except MissingPayload:
        return False
    return True


def trusted_roots(ledger: Ledger) -> set[str]:
    """The root public key of the FLIGHTLOG_HOME the Ledger was opened with, when it holds one."""
    own = ledger.keys.root_public() if isinstance(ledger.keys, LedgerKeys) else None
    return {own} if own else set()


def _leading_count(error: str | None) -> int:
    """The count a `capture.lost` or `capture.overflow` event's error starts with."""
    word = (error or "").split(" ", 1)[0]
    return int(word) if word.isdigit() else 0


def _blobs(ledger: Ledger, fraction: float, seed: int | None) -> Iterator[tuple[str, str, bytes | None]]:
    rng = random.Random(seed)
    with ledger.engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=200).execute(
            select(BLOBS.c.sha256, BLOBS.c.location, BLOBS.c.data).order_by(BLOBS.c.sha256)
        )
        for sha, location, data in result:
            if fraction >= 1.0 or rng.random() < fraction:
                yield sha, location, None if data is None else bytes(data)


def verify(
    ledger: Ledger,
    sample_pct: float = 100.0,
    progress: Progress | None = None,
    seed: int | None = None,
    anchors: Sequence[str] = (),
    keys: Mapping[str, bytes] | None = None,
    roots: Collection[str] = (),
    witnesses: Sequence[str] = (),
) -> VerifyReport:
    """Check every chain (against `anchors`, heads printed earlier) with the keys the Ledger was
    opened with (`storage.chain.signing`), `sample_pct` percent of the payloads (all by default)
    and the store's orphans. `keys` replaces the MAC keys held (a verifier elsewhere holding
    others); `roots` are root public keys to trust beside this home's own root. Each of
    `witnesses` (URLs, `storage.witness.stores`) is read: its checkpoints must be prefixes of the
    Ledger, and the roots they name are trusted too (a witness is out of the writers' reach)."""
    if not 0 < sample_pct <= 100:
        raise StorageError(f"--sample must be in (0, 100], got {sample_pct}")
    fraction = sample_pct / 100.0
    report = VerifyReport()
    held = keys if keys is not None else ledger.keys.held() if ledger.keys is not None else {}
    trusted = set(roots) | trusted_roots(ledger)
    checkpoints: list[Checkpoint] = []
    if witnesses:
        report.witness = WitnessReport()
        kept = [item for url in witnesses for item in open_witness(url).read()]
        checkpoints = signed_checkpoints(kept, report.witness)
        trusted |= report.witness.roots
    report.chain = ledger._read(lambda conn: verify_chain(conn, anchors, keys=held, roots=trusted))
    if report.witness is not None:
        witness = report.witness

        def against(conn: Connection) -> None:
            registered = {c: r.public_key for c, r in registry.registrations(conn).items()}
            compare(conn, checkpoints, registered, witness)

        ledger._read(against)
    with ledger.engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(BLOBS)).scalar_one())
        referenced = {r[0] for r in conn.execute(select(EVENTS.c.payload_sha256).distinct())}
        in_store = {r[0] for r in conn.execute(select(BLOBS.c.sha256).where(BLOBS.c.location == "store"))}
        counted = select(EVENTS.c.kind, EVENTS.c.error).where(
            EVENTS.c.kind.in_((kinds.CAPTURE_LOST, kinds.CAPTURE_OVERFLOW))
        )
        for kind, error in conn.execute(counted):
            number = _leading_count(error)
            if kind == kinds.CAPTURE_LOST:
                report.lost += number
            else:
                report.dropped += number
    prunes = check_prunes(ledger, trusted)
    report.chain.problems.extend(prunes.problems)
    report.pruned = sorted(prunes.pruned.values(), key=lambda p: p.sha256)
    report.total = round(total * fraction) if fraction < 1 else total
    for sha, location, data in _blobs(ledger, fraction, seed):
        if sha in prunes.pruned:  # its bytes may be gone: the signed record says why
            if _still_stored(ledger, location, data, sha):
                report.pruned_pending.append(sha)
            report.checked += 1
            continue
        try:  # streamed: a payload of any size is checked in a few MiB of memory
            frame = io.BytesIO(data) if location == "inline" and data is not None else ledger.blobs.open(sha)
            with frame:
                report.bytes_checked += codec.check(frame, sha)
        except CorruptPayload:
            report.corrupted.append(sha)
        except MissingPayload:
            report.missing.append(sha)
        report.checked += 1
        if progress:
            progress(report.checked, max(report.total, report.checked))
        if sha not in referenced:
            report.unreferenced.append(sha)
    report.orphaned = sorted(k for k in ledger.blobs.addresses() if k not in in_store)
    return report
