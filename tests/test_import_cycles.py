"""The cycle check `make imports` runs: circles found whatever hides them, function-level imports counted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import grimp

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "import_cycles.py"


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("import_cycles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_circle_of_any_length_is_one_group_and_a_chain_is_none() -> None:
    """a -> b -> c -> a is reported as one group; d -> a (into the circle, not back) is not in it."""
    graph = grimp.ImportGraph()
    for importer, imported in (
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.c", "p.a"),
        ("p.d", "p.a"),
        ("p.e", "p.f"),
    ):
        graph.add_import(importer=importer, imported=imported)
    assert _script().cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_imports_inside_functions_are_counted_and_type_checking_ones_are_not(tmp_path: Path) -> None:
    """Only project imports that run inside a function count; `if TYPE_CHECKING:` ones never run."""
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import storage.ledger\n"
        "if TYPE_CHECKING:\n"
        "    from catalog.tool import Tool\n"
        "def f():\n"
        "    import json\n"
        "    from tui.app import BrowseApp\n"
        "    if TYPE_CHECKING:\n"
        "        from addons.capture import Capture\n"
        "    def g():\n"
        "        import addons.errors\n"
    )
    assert list(_script().function_imports(source)) == [(7, "tui.app"), (11, "addons.errors")]


def test_the_project_has_no_circle() -> None:
    """The check passes on this tree (what `make imports` runs), imports under TYPE_CHECKING counted."""
    script = _script()
    assert script.cycles(script.import_graph(*script.PACKAGES)) == []


def test_a_circle_under_type_checking_is_found(tmp_path: Path) -> None:
    """Two modules that import each other only for the type checker are still a circle."""
    package = tmp_path / "typedcircle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typedcircle import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from typedcircle import a\n"
    )
    import sys

    script = _script()
    sys.path.insert(0, str(tmp_path))
    try:
        graph = script.import_graph("typedcircle")
    finally:
        sys.path.remove(str(tmp_path))
    assert script.cycles(graph) == [["typedcircle.a", "typedcircle.b"]]
