"""Run benchmarks by name (`python -m bench ledger capture`), or every one found in bench/.

Each runs with its own defaults (run one as `python -m bench.NAME --help` to see its options).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")
    )
    for name in names:
        print(f"== bench.{name} ==", flush=True)
        module = importlib.import_module(f"bench.{name}")
        sys.argv = [f"python -m bench.{name}"]  # each benchmark parses its own (here: no) options
        if inspect.signature(module.main).parameters:
            module.main([])
        else:
            module.main()


if __name__ == "__main__":
    main(sys.argv[1:])
