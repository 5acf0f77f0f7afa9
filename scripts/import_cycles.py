"""Fail when the project's modules import each other in a circle, counting imports inside functions.

import-linter's contracts check the direction between packages and wings; a circle between two
modules of one package (or one hidden behind an import inside a function, or under `if
TYPE_CHECKING:`) passes them. This check builds the import graph with grimp (which import-linter
installs), every `import` statement counted wherever it stands, those under `if TYPE_CHECKING:`
too: they never run, but a circle there is still two modules that each need the other to be
understood (usually a type that belongs a floor down). It reports each strongly connected group of
modules. It also counts the imports of the project's own modules made inside functions (those that
run), the usual way a circle is hidden: `--list` prints them, so each one can say why it is deferred
(a slow import) or move to the top.

Usage: python scripts/import_cycles.py [--list]   (exit 1 when there is a cycle)
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import grimp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from project import packages

PACKAGES = packages()


def import_graph(*packages: str) -> grimp.ImportGraph:
    """The packages' imports, those under `if TYPE_CHECKING:` included."""
    return grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [
            (root, iter(sorted(graph.find_modules_directly_imported_by(root))))
        ]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _files(package: str) -> Iterable[Path]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"import_cycles: package {package} not found")
    for folder in spec.submodule_search_locations:
        yield from sorted(p for p in Path(folder).rglob("*.py") if "migrations" not in p.parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def function_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of each import of a project module inside a function body."""

    def visit(node: ast.AST, in_function: bool) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if in_function and isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] in PACKAGES:
                        yield child.lineno, alias.name
            elif (
                in_function
                and isinstance(child, ast.ImportFrom)
                and child.module
                and child.module.split(".")[0] in PACKAGES
            ):
                yield child.lineno, child.module
            yield from visit(child, inside)

    yield from visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)


def main(argv: list[str]) -> int:
    graph = import_graph(*PACKAGES)
    found = cycles(graph)
    deferred = [
        (path, line, module)
        for pkg in PACKAGES
        for path in _files(pkg)
        for line, module in function_imports(path)
    ]
    if "--list" in argv:
        for path, line, module in deferred:
            print(f"{path}:{line}: {module}")
    for group in found:
        print("import cycle: " + " <-> ".join(group), file=sys.stderr)
    counted = f"{len(deferred)} function-level imports of project modules"
    print(f"{len(graph.modules)} modules, {len(found)} import cycles, {counted}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
