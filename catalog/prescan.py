"""A folder's stat tags, taken by a forked child while the parent goes on starting up.

Checking a Directory folder is one stat per file (a file edited in place changes its own mtime
only, never its folder's), about as long at 25,000 rows as the rest of opening it. `flightlog mcp`
meanwhile imports the MCP SDK; in one process both hold the one GIL and add up, so the check runs
in a child on the other core and hands back each bundle's stat tag. The parent, once its store is
open, compares them with the tags it stored: all equal, and nothing of the folder is read; any
difference, or no answer at all, and the Directory syncs as it always does, scanning again itself.
A skipped check can therefore never serve stale rows: it only skips when a full scan said so.
`flightlog find` does the same where it may use more than one core, in two children that each
stat half of every bundle's files (`catalog.folder.PARTS`): its own imports and the stored index's
load overlap the check, and the halves end sooner than one child doing it all (243 against 268 ms
of wall time at 25,000 rows on an idle 2-core machine, 293 against 312 with the other core busy).
The parent loads the stored index before it waits for the tags, so that load is overlapped too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from catalog.folder import PARTS, combine, part_tags, scan
from catalog.forked import in_child

Prescanned = Callable[[], dict[str, str] | None]
"""Waits for the child's tags (None when it could not give them)."""


def prescan(folder: Path, *, split: bool = False) -> Prescanned:
    """Start scanning `folder` in forked children (`catalog.forked`: only from a process of one
    thread, the command line's before the SDK's preload starts); call the result for its stat
    tags by bundle. One child stats every document; with `split` (where the cores are there for
    them) `PARTS` children each stat their part of each bundle (`catalog.folder.PARTS`), and the
    parts make the same tags."""
    if not split:
        whole = in_child(_tags, folder)
        return lambda: _checked(whole())
    waits = [in_child(part_tags, folder, k) for k in range(PARTS)]

    def result() -> dict[str, str] | None:
        parts = [_checked(wait()) for wait in waits]  # every child waited for, whatever the first gave
        whole = [p for p in parts if p is not None]
        if len(whole) < PARTS or any(p.keys() != whole[0].keys() for p in whole):
            return None  # a child failed, or a bundle came or went between their scans
        return {bundle: combine([p[bundle] for p in whole]) for bundle in whole[0]}

    return result


def _checked(tags: object) -> dict[str, str] | None:
    return tags if isinstance(tags, dict) else None


def _tags(folder: Path) -> dict[str, str]:
    return {bundle: found.stat_tag for bundle, found in scan(folder).items()}
