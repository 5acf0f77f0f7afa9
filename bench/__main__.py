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


def available() -> list[str]:
    """Every benchmark module in bench/ (a name not starting with `_`), sorted."""
    return sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")
    )


def usage() -> str:
    """What `python -m bench --help` prints: how to call it and the benchmarks it knows."""
    return (
        "usage: python -m bench [NAME ...]\n\n"
        "Runs the named benchmarks (every one when none is named), each with its own defaults;\n"
        "`python -m bench.NAME --help` shows one benchmark's options.\n\n"
        f"benchmarks: {' '.join(available())}"
    )


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv):
        print(usage())
        return
    known = available()
    unknown = [a for a in argv if a not in known]
    if unknown:  # an option or a typo: one line naming it and what there is, not an import traceback
        sys.exit(
            f"bench: no benchmark named {unknown[0]!r} (options go to `python -m bench.NAME`); "
            f"known: {' '.join(known)}"
        )
    names = argv or known
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
