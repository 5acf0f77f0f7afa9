"""`flightlog ledger erase|prune|du`: retention that verifies.

`erase` removes one payload's bytes on request (a person's data, a leaked secret), `prune` every
payload a retention policy lets go (`FLIGHTLOG_HOME/retention.toml`, or `--policy FILE`), each under
a prune record signed with FLIGHTLOG_HOME's root key (`storage.retention.prune`): the events stay,
and readers say "pruned on DATE (reason)". `du` says what the payloads hold and what the policy frees.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from flightlog.commands.options import BlobsOpt, JsonOpt, LedgerOpt
from flightlog.errors import CommandError
from flightlog.settings import load_settings

PolicyOpt = Annotated[
    Path | None,
    typer.Option("--policy", help="A retention policy (TOML); default: FLIGHTLOG_HOME/retention.toml."),
]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why: kept, signed, with the prune record.")]


def _policy_file(given: Path | None) -> Path:
    from storage.retention.policy import FILE

    return given if given is not None else load_settings().home / FILE


def _size(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def erase(
    sha256: Annotated[list[str], typer.Argument(help="The payload's SHA-256 (as `ledger row` shows it).")],
    reason: ReasonOpt = "",
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
) -> None:
    """Remove payloads' bytes under a signed prune record; their events stay, and every reader shows
    "pruned on DATE (reason)" instead."""
    from storage.retention.prune import prune

    if not reason.strip():
        raise CommandError("erase needs --reason TEXT (kept with the signed prune record)")
    for sha in sha256:
        if len(sha) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha):
            raise CommandError(f"{sha!r} is not a payload's SHA-256 (64 hex digits)")
    opened = load_settings().open_existing_ledger(ledger, blobs)
    try:
        done = prune(opened, sha256, reason)
    finally:
        opened.close()
    for sha in done.pruned:
        typer.echo(f"pruned {sha} ({reason})")
    for sha in done.already:
        typer.echo(f"already pruned {sha}")
    for event_id in done.records:
        typer.echo(f"record {event_id}")


def prune_command(
    policy: PolicyOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
    ledger: LedgerOpt = None,
    blobs: BlobsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove every payload the retention policy lets go, under signed prune records."""
    from storage.reader import reading
    from storage.retention.policy import due_payloads, load
    from storage.retention.prune import prune

    rules = load(_policy_file(policy))
    opened = load_settings().open_existing_ledger(ledger, blobs)
    try:
        with reading(opened.engine) as reader:
            due = due_payloads(reader, rules, datetime.now(UTC))
        shas = [r["sha256"] for r in due]
        done = None if dry_run or not shas else prune(opened, shas, rules.describe())
    finally:
        opened.close()
    size = sum(int(r["size"]) for r in due)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "policy": rules.describe(),
                    "dry_run": dry_run,
                    "payloads": shas,
                    "bytes": size,
                    "records": [] if done is None else done.records,
                },
                indent=2,
            )
        )
        return
    verb = "would prune" if dry_run else "pruned"
    typer.echo(f"{rules.describe()}: {verb} {len(shas)} payloads ({_size(size)})")
    for event_id in [] if done is None else done.records:
        typer.echo(f"record {event_id}")


def du(
    by: Annotated[
        list[str] | None, typer.Option("--by", help="age, host, agent or kind (repeatable; default: age).")
    ] = None,
    policy: PolicyOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What the Ledger's payloads hold by age, host, agent and kind, and what the retention policy
    (if there is one) would free."""
    from storage.retention import usage
    from storage.retention.policy import load

    keys = list(dict.fromkeys(by or ["age"]))
    if bad := [k for k in keys if k not in usage.BY]:
        raise CommandError(f"du --by {bad[0]}: one of {', '.join(usage.BY)}")
    path = _policy_file(policy)
    rules = load(path) if policy is not None or path.is_file() else None
    now = datetime.now(UTC)
    reader = load_settings().open_reader(ledger)
    try:
        held, pruned = usage.totals(reader)
        groups = {k: usage.by(reader, k, now) for k in keys}
        freed = usage.would_free(reader, rules, now) if rules is not None else None
    finally:
        reader.close()
    if as_json:
        body: dict[str, Any] = {
            "held": held.to_json(),
            "pruned": pruned.to_json(),
            "by": {k: [g.to_json() for g in v] for k, v in groups.items()},
            "policy": None if freed is None else {"policy": freed.key, **freed.to_json()},
        }
        typer.echo(json.dumps(body, indent=2))
        return
    typer.echo(f"held: {held.payloads} payloads, {_size(held.size)} ({_size(held.stored)} stored)")
    typer.echo(
        f"pruned: {pruned.payloads} payloads, {_size(pruned.size)} ({_size(pruned.stored)} stored) freed"
    )
    for key, found in groups.items():
        typer.echo(f"by {key}:")
        for g in found:
            name = "(none)" if g.key is None else str(g.key)
            typer.echo(
                f"  {name:32} {g.payloads:>8} payloads  {_size(g.size):>10}  {_size(g.stored):>10} stored"
            )
    if freed is not None:
        typer.echo(
            f"{freed.key} would free {freed.payloads} payloads, {_size(freed.size)}"
            f" ({_size(freed.stored)} stored)"
        )
