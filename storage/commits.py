"""The Ledger's commits in order, for a reader that follows it as it grows (the live OTLP stream).

Every batch a collector commits is a link of its chain (`storage.chain.links`): numbered 1, 2, ... per
collector in commit order, with the ids of the events it inserted. A follower keeps, per collector,
the last link it read, and asks for the links after it: nothing committed is skipped, whichever
process (a proxy worker, the door, `mcp-record`) committed it, and nothing is read twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.filters import QueryError


@dataclass(frozen=True, slots=True)
class Commit:
    """One committed batch: its collector, its place in the collector's chain, the events it added."""

    collector: str
    index: int
    event_ids: tuple[str, ...]


_COLLECTORS = "SELECT collector FROM positions"
_HEAD = "SELECT MAX(chain_index) FROM batches WHERE collector = :c"
_AFTER = (
    "SELECT chain_index, event_ids FROM batches WHERE collector = :c AND chain_index > :i"
    " ORDER BY chain_index LIMIT :n"
)


def _error(e: Exception) -> QueryError:
    return QueryError(f"cannot read the Ledger's commits: {e}".splitlines()[0])


def chain_heads(engine: Engine) -> dict[str, int]:
    """Each collector's last chain link (a follower starting now starts after these). Collectors are
    read from `positions` (a row each) and their heads through the chain's index: a round costs a
    few index lookups whatever the Ledger's size."""
    try:
        with engine.connect() as conn:
            collectors = [str(c) for (c,) in conn.execute(text(_COLLECTORS))]
            heads = {c: conn.execute(text(_HEAD), {"c": c}).scalar() for c in collectors}
    except SQLAlchemyError as e:
        raise _error(e) from e
    return {c: int(i) for c, i in heads.items() if i is not None}


def commits_after(engine: Engine, after: dict[str, int], limit: int = 500) -> list[Commit]:
    """The commits past `after` (a collector not named: all of its commits), oldest first per
    collector, at most `limit` of each collector's."""
    due = [c for c, i in chain_heads(engine).items() if i > after.get(c, 0)]
    found: list[Commit] = []
    try:
        with engine.connect() as conn:
            for collector in due:
                rows = conn.execute(text(_AFTER), {"c": collector, "i": after.get(collector, 0), "n": limit})
                found += [Commit(collector, int(i), tuple(json.loads(ids or "[]"))) for i, ids in rows]
    except (SQLAlchemyError, ValueError) as e:
        raise _error(e) from e
    return found
