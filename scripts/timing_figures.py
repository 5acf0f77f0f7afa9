"""Fail when a docstring or comment of the packages holds a timing figure (`12 ms`, `0.85 s`, `2.3x`).

A figure in the code goes stale the moment the code or the machine changes, and nothing re-measures
it. Docstrings and comments say why; figures belong in `bench/` output and in commit messages.
Looked at: every docstring (module, class, function, and the string under an attribute) and every
`#` comment of the packages' `.py` files; string values the code uses (help texts, messages) are not.

Usage: python scripts/timing_figures.py   (exit 1 listing each figure found)
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from project import packages

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = packages()
FIGURE = re.compile(
    r"(?<![\w.])~?\d+(?:[.,]\d+)*(?:\s?-\s?\d+(?:[.,]\d+)*)?"  # 12, 1.3, 1,200, 153-213
    r"(?: (?:ms|us|µs|ns|s|seconds?|milliseconds?|microseconds?)\b|x\b)"
)
"""A number (a range too) with a unit of time after a space (`12 ms`, `0.85 s`: `500ms` or `90s` as a
setting's syntax is not one), or a ratio written `2.3x`."""


QUOTED = re.compile(r"\"[^\"]*\"|`[^`]*`|(?<!\w)'[^']*'(?!\w)")
"""A quoted example (`"slower than 1 second"`, `'500 ms'`): what a user types, not a measurement."""


def figures(text: str) -> list[str]:
    """The timing figures in one line of text, as written."""
    return [m.group(0) for m in FIGURE.finditer(text)]


def unquoted(text: str) -> str:
    """`text` with its quoted examples blanked out (a quote may span lines; the lines stay)."""
    return QUOTED.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _docstrings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of every string that stands alone as a statement: docstrings of modules,
    classes and functions, and the strings under attributes."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def _comments(source: str) -> Iterator[tuple[int, str]]:
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def found_in(source: str) -> list[tuple[int, str]]:
    """(line, figure) of each timing figure in the docstrings and comments of one module's source."""
    out: list[tuple[int, str]] = []
    for start, text in [*_docstrings(ast.parse(source)), *_comments(source)]:
        for offset, line in enumerate(unquoted(text).splitlines()):
            out.extend((start + offset, figure) for figure in figures(line))
    return sorted(out)


def scan(root: Path, packages: Iterable[str]) -> Iterator[tuple[str, int, str]]:
    """(path relative to `root`, line, figure) of every figure in the modules of `packages`."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for line, figure in found_in(path.read_text(encoding="utf-8")):
                yield path.relative_to(root).as_posix(), line, figure


def main() -> int:
    found = list(scan(ROOT, PACKAGES))
    for path, line, figure in found:
        print(f"{path}:{line}: timing figure {figure!r} in a docstring or comment", file=sys.stderr)
    if found:
        print(
            f"{len(found)} timing figures: say why in words, put the number in bench/ output", file=sys.stderr
        )
        return 1
    print("no timing figures in docstrings or comments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
