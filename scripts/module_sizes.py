"""Fail when a module of the project is over 400 lines: one concept per module keeps each readable.

A module that grows past the limit holds more than one concept; split it by concept (not by cutting
it in half). Counted: every `.py` file of the packages (tests, bench and scripts are not packages),
migrations included.

Usage: python scripts/module_sizes.py   (exit 1 when a module is over the limit)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("formats", "storage", "catalog", "recording", "egress", "addons", "tui", "flightlog")
LIMIT = 400
KNOWN: set[str] = set()
"""Modules over the limit whose split is under way elsewhere (named, so no other one slips in)."""


def lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def oversized(root: Path, packages: Iterable[str], limit: int = LIMIT) -> Iterator[tuple[str, int]]:
    """(path relative to `root`, lines) of each module of `packages` over `limit` lines."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            count = lines(path)
            if count > limit:
                yield path.relative_to(root).as_posix(), count


def main() -> int:
    found = dict(oversized(ROOT, PACKAGES))
    new = {path: count for path, count in found.items() if path not in KNOWN}
    for path, count in sorted(new.items()):
        print(f"module over {LIMIT} lines: {path} ({count}); split it by concept", file=sys.stderr)
    for path in sorted(KNOWN - set(found)):
        print(f"module_sizes: {path} is no longer over {LIMIT} lines: remove it from KNOWN", file=sys.stderr)
    known = len(found) - len(new)
    print(f"{len(found)} modules over {LIMIT} lines ({known} known, being split elsewhere)")
    return 1 if new or KNOWN - set(found) else 0


if __name__ == "__main__":
    sys.exit(main())
