"""The size check `make imports` runs: no module of the packages over 400 lines but the named ones."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "module_sizes.py"


def _script() -> ModuleType:
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


def test_the_project_passes() -> None:
    """Every module is within the limit, but the ones named as being split elsewhere."""
    assert _script().main() == 0
