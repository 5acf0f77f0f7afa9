"""Every checkpoint a witness kept is a prefix of the Ledger; what came after the last is a tail.

A checkpoint proves what the Ledger held when it was published: each collector's chain had batch
#index with that digest (which binds every batch and event before it, `storage.chain.links`) and
that many events. The Ledger verifies against it when each of those batches is still there with
the same digest and count; a batch removed, a chain cut short or rewritten (even re-signed by a key
holder, even re-registered by the root) no longer matches. What was appended after the newest
checkpoint cannot be told from what a key holder forged there: it is named as the unwitnessed tail
(its size and how long it has gone unwitnessed), never as verified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from storage.chain import links as chain
from storage.chain.signing import short
from storage.witness.checkpoint import ROOT, Checkpoint
from storage.witness.stores import Kept


@dataclass(frozen=True, slots=True)
class Tail:
    """A collector's batches after the newest checkpoint."""

    collector: str
    first: int
    last: int
    events: int
    oldest: str
    """When the first of them was committed (UTC text)."""


@dataclass
class WitnessReport:
    """What the witnesses' checkpoints say of the Ledger; `ok` when no line was reported."""

    checkpoints: int = 0
    newest: str | None = None
    """When the newest checkpoint was made (UTC text); None: no checkpoint at all."""
    problems: list[str] = field(default_factory=list)
    tails: list[Tail] = field(default_factory=list)
    roots: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems


def signed_checkpoints(kept: Iterable[Kept], report: WitnessReport) -> list[Checkpoint]:
    """The checkpoints whose signature verifies with the key they name (their roots joining the
    roots a verify trusts: a witness is out of the writers' reach); a line for anything else."""
    good = []
    for item in kept:
        if item.checkpoint is None:
            report.problems.append(f"forged: {item.where} is not a checkpoint ({item.problem})")
        elif not item.checkpoint.signed():
            report.problems.append(
                f"forged: the checkpoint of {item.checkpoint.at} ({item.where}) does not verify with its key"
            )
        else:
            good.append(item.checkpoint)
            report.roots.add(item.checkpoint.root)
    report.checkpoints = len(good)
    return good


def _chains(conn: Connection) -> dict[str, dict[int, tuple[str, int, str]]]:
    """collector -> index -> (digest, events up to it, committed at)."""
    rows = chain.query(
        conn,
        "SELECT collector, chain_index, digest, new, committed_at FROM batches"
        " WHERE chain_index IS NOT NULL ORDER BY collector, chain_index",
    )
    chains: dict[str, dict[int, tuple[str, int, str]]] = {}
    total: dict[str, int] = {}
    for collector, index, digest, new, committed in rows:
        total[collector] = total.get(collector, 0) + int(new)
        chains.setdefault(str(collector), {})[int(index)] = (
            str(digest),
            total[collector],
            chain.time_text(committed),
        )
    return chains


def compare(
    conn: Connection,
    checkpoints: list[Checkpoint],
    registered: Mapping[str, str],
    report: WitnessReport,
) -> None:
    """Each checkpoint's signer and heads against the Ledger (`registered`: collector -> the public
    key the Ledger registers for it), then the tail after the newest."""
    chains = _chains(conn)
    witnessed: dict[str, int] = {}
    for cp in sorted(checkpoints, key=lambda c: c.at):
        label = f"the checkpoint of {cp.at}"
        if cp.signer == ROOT:
            if cp.key != cp.root:
                report.problems.append(f"forged: {label} says the root signed it with another key")
        elif registered.get(cp.signer) != cp.key:
            report.problems.append(
                f"forged: {label} is signed by {cp.signer}'s key {short(cp.key)}, which the Ledger does not"
                " register for it (its registration was replaced or removed)"
            )
        for collector, (index, digest, events) in sorted(cp.heads().items()):
            _head(label, collector, index, digest, events, chains.get(collector, {}), report)
            witnessed[collector] = max(witnessed.get(collector, 0), index)
        report.newest = cp.at
    for collector, batches in sorted(chains.items()):
        after = sorted(i for i in batches if i > witnessed.get(collector, 0))
        if after:
            before = batches.get(after[0] - 1, ("", 0, ""))[1]
            report.tails.append(
                Tail(collector, after[0], after[-1], batches[after[-1]][1] - before, batches[after[0]][2])
            )


def _head(
    label: str,
    collector: str,
    index: int,
    digest: str,
    events: int,
    batches: Mapping[int, tuple[str, int, Any]],
    report: WitnessReport,
) -> None:
    found = batches.get(index)
    if found is None:
        end = f"ends at #{max(batches)}" if batches else "is gone"
        report.problems.append(
            f"truncated: {label} witnessed {collector} at #{index}; the Ledger's chain of it {end}"
        )
    elif found[0] != digest:
        report.problems.append(
            f"forged: {label} witnessed {collector} #{index} as {digest[:16]}; the Ledger's #{index} is"
            f" {found[0][:16]} (rewritten since)"
        )
    elif found[1] != events:
        report.problems.append(
            f"forged: {label} witnessed {events} events of {collector} up to #{index};"
            f" the Ledger has {found[1]}"
        )
