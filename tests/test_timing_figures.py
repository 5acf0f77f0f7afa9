"""The figure check `make lint` runs: no timing figure in a docstring or comment of the packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "timing_figures.py"


def _script() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("timing_figures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("took 12 ms a batch", ["12 ms"]),
        ("~1.3 us a row", ["~1.3 us"]),
        ("0.85 s importing SQLAlchemy", ["0.85 s"]),
        ("2.3x the events a second", ["2.3x"]),
        ("153-213 ms before, 4 µs after", ["153-213 ms", "4 µs"]),
        ("waits 2 seconds, 1,200 milliseconds", ["2 seconds", "1,200 milliseconds"]),
        ("a duration such as 500ms or 90s (a setting's syntax)", []),
        ("HTTP 404s and 0x1F and v2 and 3 rows", []),
        ('a question like "slower than 1 second" or `0.5 s`', []),
    ],
)
def test_a_figure_is_found_as_written_and_a_quoted_example_is_not(line: str, found: list[str]) -> None:
    """Numbers with a unit of time after a space, or a ratio `2.3x`, are figures; a setting's
    compact syntax, an HTTP status, hex and a quoted example of what a user types are not."""
    script = _script()
    assert script.figures(script.unquoted(line)) == found


def test_docstrings_and_comments_are_searched_and_code_strings_are_not() -> None:
    """Module, function and attribute docstrings and `#` comments count, with their line numbers;
    a string the code uses (a help text, a message) does not."""
    source = '''"""Module: it took 12 ms."""

LIMIT = 5
"""An attribute: 3 us a row."""


def f() -> str:
    """Plain words only."""
    x = 1  # measured 0.5 s
    return "a message saying 30 ms is fine"
'''
    assert _script().found_in(source) == [(1, "12 ms"), (4, "3 us"), (9, "0.5 s")]


def test_a_package_with_a_figure_fails_and_names_the_file(tmp_path: Path) -> None:
    """`scan` names each file and line; a clean package gives nothing."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "clean.py").write_text('"""Says why, not how fast."""\n')
    (tmp_path / "pkg" / "sub" / "stale.py").write_text('"""First line.\n\nA look costs ~75 us."""\n')
    assert list(_script().scan(tmp_path, ["pkg"])) == [("pkg/sub/stale.py", 3, "~75 us")]


def test_the_project_passes() -> None:
    """No docstring or comment of the packages holds a timing figure."""
    assert _script().main() == 0
