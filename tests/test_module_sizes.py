"""The size warning `make imports` prints: modules over 400 lines are named, and nothing fails on them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "module_sizes.py"


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("module_sizes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_module_over_the_limit_is_found_with_its_size(tmp_path: Path) -> None:
    """A module of 401 lines is named, one of 400 is not, in nested folders too."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "ok.py").write_text("x = 1\n" * 400)
    (tmp_path / "pkg" / "sub" / "big.py").write_text("x = 1\n" * 401)
    assert list(_script().oversized(tmp_path, ["pkg"])) == [("pkg/sub/big.py", 401)]


def test_the_warning_names_each_module_largest_first_and_counts_them() -> None:
    """The report is a warning per module (largest first) and a count; it is a warning, not a failure."""
    lines = _script().report([("a/small.py", 410), ("b/large.py", 900)])
    assert lines[0].startswith("warning: b/large.py has 900 lines")
    assert lines[1].startswith("warning: a/small.py has 410 lines")
    assert lines[-1] == "2 modules over 400 lines"
    assert _script().main() == 0
