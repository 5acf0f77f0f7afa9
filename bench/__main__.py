"""Run benchmarks by name (`python -m bench ledger capture`), or every one found in bench/.

Each runs with its own defaults (run one as `python -m bench.NAME --help` to see its options). One
that cannot run here (a missing tool) prints why in one line and the others still run.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

from bench._needs import Skip


def main(argv: list[str]) -> None:
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")
    )
    skipped = []
    for name in names:
        print(f"== bench.{name} ==", flush=True)
        module = importlib.import_module(f"bench.{name}")
        sys.argv = [f"python -m bench.{name}"]  # each benchmark parses its own (here: no) options
        try:
            if inspect.signature(module.main).parameters:
                module.main([])
            else:
                module.main()
        except Skip as e:
            print(f"bench.{name}: skipped: {e}", flush=True)
            skipped.append(name)
    if skipped:
        print(f"skipped: {', '.join(skipped)}")


if __name__ == "__main__":
    main(sys.argv[1:])
