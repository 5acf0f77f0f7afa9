"""Name the modules of the project over 400 lines: a warning to read, not a cap that splits a concept.

A long module may hold more than one concept; if it does, split it by concept (never by cutting it
in half to pass a count). If it holds one concept that is simply long, leave it whole. Counted: every
`.py` file of the packages (tests, bench and scripts are not packages), migrations included.

Usage: python scripts/module_sizes.py   (always exits 0; `make imports` prints what it names)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from project import ROOT, packages

LIMIT = 400


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


def report(found: Iterable[tuple[str, int]], limit: int = LIMIT) -> list[str]:
    """The lines to print: one warning per module over `limit`, then a count."""
    found = sorted(found, key=lambda item: -item[1])
    out = [
        f"warning: {path} has {count} lines (over {limit}): one concept, or several?" for path, count in found
    ]
    out.append(f"{len(found)} modules over {limit} lines")
    return out


def main() -> int:
    for line in report(oversized(ROOT, packages())):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
