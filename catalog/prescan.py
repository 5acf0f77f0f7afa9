"""A folder's stat tags, taken by a forked child while the parent goes on starting up.

Checking a Directory folder is one stat per file (a file edited in place changes its own mtime
only, never its folder's), about as long at 25,000 rows as the rest of opening it. `flightlog mcp`
meanwhile imports the MCP SDK; in one process both hold the one GIL and add up, so the check runs
in a child on the other core and hands back each bundle's stat tag. The parent, once its store is
open, compares them with the tags it stored: all equal, and nothing of the folder is read; any
difference, or no answer at all, and the Directory syncs as it always does, scanning again itself.
A skipped check can therefore never serve stale rows: it only skips when a full scan said so.
`flightlog find` does the same where it may use more than one core: its own imports and the
stored index's load overlap the check (0.89x its wall time on an idle 2-core machine, 1.07x with
the other core busy). The parent loads the stored index before it waits for the tags, so that
load is overlapped too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from catalog.forked import in_child

Prescanned = Callable[[], dict[str, str] | None]
"""Waits for the child's tags (None when it could not give them)."""


def prescan(folder: Path) -> Prescanned:
    """Start scanning `folder` in a forked child (`catalog.forked`: only from a process of one
    thread, the command line's before the SDK's preload starts); call the result for its stat
    tags by bundle."""
    wait = in_child(_tags, folder)

    def result() -> dict[str, str] | None:
        tags = wait()
        return tags if isinstance(tags, dict) else None

    return result


def _tags(folder: Path) -> dict[str, str]:
    from catalog.folder import scan  # imported in the child: the parent imports it meanwhile

    return {bundle: found.stat_tag for bundle, found in scan(folder).items()}
