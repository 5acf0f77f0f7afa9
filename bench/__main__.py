"""Run benchmarks by name (`python -m bench ledger capture`), or every one found in bench/."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")
    )
    for name in names:
        print(f"== bench.{name} ==", flush=True)
        importlib.import_module(f"bench.{name}").main([])


if __name__ == "__main__":
    main(sys.argv[1:])
