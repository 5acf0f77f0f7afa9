"""The project's packages, read from their one home: import-linter's `root_packages` in pyproject.toml.

The scripts here import it beside themselves (`sys.path` holds the scripts' folder when one is run
as `python scripts/NAME.py`; the tests load a script by path and put the folder there first).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def packages(root: Path = ROOT) -> tuple[str, ...]:
    """The project's top-level packages, in pyproject.toml's order (lowest floor first)."""
    with (root / "pyproject.toml").open("rb") as f:
        return tuple(tomllib.load(f)["tool"]["importlinter"]["root_packages"])
