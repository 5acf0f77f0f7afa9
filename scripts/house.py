"""The house in figures: modules and lines per package, the largest modules, and each fact with its homes.

Issue 50 asked that each fact (a duration grammar, the list of form names, an error root, the grace a
streamed answer gets, ...) be written in one place. Saying so in prose goes stale; this script finds
each fact's definitions in the source (by reading it with `ast`, never importing it), so the figures
can be reproduced on any commit and a test (tests/test_house.py) can hold each fact to its homes.

Usage:
    python scripts/house.py               the working tree
    python scripts/house.py --at 94a1cf8  a commit, read with `git ls-tree` and `git cat-file` into a
                                          temporary folder (the working tree is not touched)
    python scripts/house.py --homes       also name each home (path:line what)

A finder is a heuristic on the syntax tree: it names what it counts in its docstring, and a home it
finds is printed with `--homes`, so a count can be checked by reading the places it names.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_PACKAGES = frozenset({"tests", "bench", "scripts"})
NOT_SETTINGS = frozenset({"FLIGHTLOG_TOKEN", "FLIGHTLOG_SEAL", "FLIGHTLOG_SEALED"})
BUILTIN_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


@dataclass(frozen=True)
class Module:
    """One `.py` file of a package: its path relative to the root, its text and its tree."""

    path: str
    text: str
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def lines(self) -> int:
        return len(self.text.splitlines())

    @property
    def dotted(self) -> str:
        parts = self.path.removesuffix(".py").split("/")
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True, order=True)
class Home:
    """Where a fact is written: a module, a line and what is there."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.what}"


Finder = Callable[[list[Module]], list[Home]]


def packages(root: Path) -> tuple[str, ...]:
    """The packages: import-linter's `root_packages` in pyproject.toml, else every top-level folder
    with an `__init__.py` but tests, bench and scripts (older commits have no such list)."""
    try:
        with (root / "pyproject.toml").open("rb") as f:
            return tuple(tomllib.load(f)["tool"]["importlinter"]["root_packages"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        found = (p.parent.name for p in root.glob("*/__init__.py"))
        return tuple(sorted(name for name in found if name not in NOT_PACKAGES))


def modules(root: Path) -> list[Module]:
    """Every module of the packages under `root`, parsed (one that does not parse is left out)."""
    out = []
    for package in packages(root):
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            out.append(Module(path.relative_to(root).as_posix(), text, tree))
    return out


def checkout(rev: str, into: Path, repo: Path = ROOT) -> Path:
    """The `.py` files and pyproject.toml of commit `rev`, written under `into` (read with git, so
    the working tree and the index are left as they are)."""
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-z", "--name-only", rev],
        check=True,
        capture_output=True,
    ).stdout.decode()
    names = [n for n in listing.split("\0") if n.endswith(".py") or n == "pyproject.toml"]
    batch = "".join(f"{rev}:{name}\n" for name in names).encode()
    out = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"], input=batch, check=True, capture_output=True
    ).stdout
    at = 0
    for name in names:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        body = out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    return into


# --- the finders: one per fact --------------------------------------------------------------------


def _walk(mods: Iterable[Module]) -> Iterator[tuple[Module, ast.AST]]:
    for mod in mods:
        for node in ast.walk(mod.tree):
            yield mod, node


def _strings(node: ast.AST) -> list[str]:
    elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []
    if isinstance(node, ast.Dict):
        elts = [k for k in node.keys if k is not None]
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _functions(mods: Iterable[Module]) -> Iterator[tuple[Module, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for mod, node in _walk(mods):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield mod, node


def duration_parsers(mods: list[Module]) -> list[Home]:
    """A grammar of durations: a compiled pattern reading a number and a unit of time (`[smhd]`,
    `ms|s|m|h`), or a table of seconds per unit (`{"s": 1, "m": 60, "h": 3600, ...}`). One home per
    module: a pattern and its table are one grammar."""
    out: list[Home] = []
    for mod, node in _walk(mods):
        what = ""
        if isinstance(node, ast.Call) and _name(node.func) in {"re.compile", "compile"} and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                pattern = arg.value
                if "\\d" in pattern and any(unit in pattern for unit in ("[smhd", "ms|s|m|h", "s|m|h|d")):
                    what = f"re.compile({pattern!r})"
        elif isinstance(node, ast.Dict) and {"s", "m", "h"} <= set(_strings(node)):
            what = "seconds per unit"
        if what and mod.path not in {h.path for h in out}:
            out.append(Home(mod.path, getattr(node, "lineno", 0), what))
    return out


def form_name_lists(mods: list[Module]) -> list[Home]:
    """A literal list of the contract's form names: 20 or more strings among them `curl` and `mcp_stdio`
    (a table keyed by them, the forms' notes, is not a list of the names)."""
    out = []
    for mod, node in _walk(mods):
        names = [] if isinstance(node, ast.Dict) else _strings(node)
        if len(names) >= 20 and {"curl", "mcp_stdio"} <= set(names):
            out.append(Home(mod.path, getattr(node, "lineno", 0), f"{len(names)} form names"))
    return out


def error_roots(mods: list[Module]) -> list[Home]:
    """A public class whose bases are all builtin exceptions: the root of an error tree of its own
    (a private one, `_Full(Exception)`, is a signal inside its module that no caller sees)."""
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.ClassDef) and node.bases and not node.name.startswith("_"):
            bases = [_name(b) for b in node.bases]
            if all(b in BUILTIN_ERRORS for b in bases):
                out.append(Home(mod.path, node.lineno, f"class {node.name}({', '.join(bases)})"))
    return out


def environment_resolvers(mods: list[Module]) -> list[Home]:
    """A module that reads flightlog's own settings from the environment itself:
    `os.environ.get("FLIGHTLOG_X")`, `env.get("FLIGHTLOG_X")`, `os.getenv(...)`, `environ["FLIGHTLOG_X"]`,
    or a settings table naming the variable a setting is read from (`env="FLIGHTLOG_X"`). The token a
    child process is handed (FLIGHTLOG_TOKEN) and the seal's plan are not settings."""
    out = []
    for mod in mods:
        names = []
        for node in ast.walk(mod.tree):
            key = None
            if (
                isinstance(node, ast.Call)
                and node.args
                and _name(node.func).endswith(("environ.get", "env.get", "getenv"))
            ):
                key = node.args[0]
            elif isinstance(node, ast.Subscript) and _name(node.value).endswith(("environ", "env")):
                key = node.slice
            elif isinstance(node, ast.keyword) and node.arg == "env":
                key = node.value
            setting = isinstance(key, ast.Constant) and str(key.value).startswith("FLIGHTLOG_")
            if setting and isinstance(key, ast.Constant) and key.value not in NOT_SETTINGS:
                names.append((getattr(node, "lineno", 0), str(key.value)))
        if names:
            line = min(n for n, _ in names)
            out.append(Home(mod.path, line, " ".join(sorted({v for _, v in names}))))
    return out


def _number(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def stream_grace_defaults(mods: list[Module]) -> list[Home]:
    """A number written as the stream grace: a default, field, keyword or option row named `*grace*`."""
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args]
            pairs = list(zip(args[len(args) - len(node.args.defaults) :], node.args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
            out += [
                Home(mod.path, d.lineno, f"{a.arg}=") for a, d in pairs if "grace" in a.arg and _number(d)
            ]
        elif isinstance(node, ast.AnnAssign | ast.Assign) and _number(node.value):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            out += [Home(mod.path, node.lineno, _name(t)) for t in targets if "grace" in _name(t).lower()]
        elif isinstance(node, ast.keyword) and node.arg and "grace" in node.arg and _number(node.value):
            out.append(Home(mod.path, node.value.lineno, f"{node.arg}="))
        elif isinstance(node, ast.Tuple | ast.Call) and (
            node.elts if isinstance(node, ast.Tuple) else node.args
        ):
            first = (node.elts if isinstance(node, ast.Tuple) else node.args)[0]
            if (
                isinstance(first, ast.Constant)
                and "grace" in str(first.value)
                and any(map(_number, node.elts if isinstance(node, ast.Tuple) else node.args))
            ):
                out.append(Home(mod.path, node.lineno, f"option {first.value!r}"))
    return sorted(set(out))


def _option_rows(mods: list[Module]) -> list[tuple[Module, ast.AST, str]]:
    """mitmproxy options flightlog declares: `add_option("flightlog_x", ...)`, a row of a table whose
    first item is `"flightlog_x"` followed by a type, or a settings row `Setting("x", ...)`."""
    out: list[tuple[Module, ast.AST, str]] = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.Call) and _name(node.func) == "Setting" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                out.append((mod, node, f"flightlog_{first.value}"))
        elif isinstance(node, ast.Call) and _name(node.func).endswith("add_option") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("flightlog_"):
                out.append((mod, node, str(first.value)))
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 3:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("flightlog_"):
                out.append((mod, node, str(first.value)))
    return out


def _literal_default(node: ast.AST | None) -> bool:
    """A default that states a value (a number, a non-empty string, True): not a name, None or empty."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and node.value not in (None, "", False)
        and not isinstance(node.value, bytes)
    )


def option_declarations(mods: list[Module]) -> list[Home]:
    """A proxy option's default written again beside its declaration: a field of a `*Config`,
    `*Settings`, `*Spec` or `*Options` class, or a parameter of a command in flightlog/commands, named
    as the option (`stream_grace` for `flightlog_stream_grace`) and holding a literal value of its own.
    Each is a second home of that option's default (zero: every option is declared once)."""
    options = {name.removeprefix("flightlog_") for _, _, name in _option_rows(mods)}
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.ClassDef) and node.name.endswith(("Config", "Settings", "Spec", "Options")):
            for item in node.body:
                if (
                    isinstance(item, ast.AnnAssign)
                    and _name(item.target) in options
                    and _literal_default(item.value)
                ):
                    out.append(Home(mod.path, item.lineno, f"{node.name}.{_name(item.target)}"))
        elif isinstance(node, ast.FunctionDef) and mod.path.startswith("flightlog/commands/"):
            args = node.args.args
            for arg, default in zip(
                args[len(args) - len(node.args.defaults) :], node.args.defaults, strict=True
            ):
                if arg.arg in options and _literal_default(default):
                    out.append(Home(mod.path, arg.lineno, f"{node.name}({arg.arg}=...)"))
    return sorted(set(out))


def hand_mapped_options(mods: list[Module]) -> list[Home]:
    """A flightlog option set by hand from a value of the same name: `flightlog_x=config.x` in a call."""
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and kw.arg.startswith("flightlog_"):
                    source = (
                        kw.value.args[0] if isinstance(kw.value, ast.Call) and kw.value.args else kw.value
                    )
                    if isinstance(source, ast.Attribute):
                        out.append(Home(mod.path, kw.value.lineno, f"{kw.arg}={_name(source)}"))
    return out


def flow_metadata_users(mods: list[Module]) -> list[Home]:
    """A module of the proxy's parts that spells the flow's metadata itself: a `META_*` key, or
    `x.metadata[...]`, `x.metadata.get(...)`, `.pop(...)` or `... in x.metadata` (one home: the
    module of typed notes). Only addons/ and its sample packages count: readback's export writes
    metadata into a flow file it makes (a field of the file, not a note between two hooks)."""
    out = []
    for mod in mods:
        if mod.package in {
            "readback",
            "door",
            "recording",
            "storage",
            "egress",
            "catalog",
            "tui",
            "flightlog",
        }:
            continue
        lines = []
        for node in ast.walk(mod.tree):
            if (
                (isinstance(node, ast.Name) and node.id.startswith("META_"))
                or (isinstance(node, ast.alias) and node.name.startswith("META_"))
                or (isinstance(node, ast.Subscript) and _name(node.value).endswith(".metadata"))
                or (
                    isinstance(node, ast.Call)
                    and _name(node.func).endswith((".metadata.get", ".metadata.pop"))
                )
                or (
                    isinstance(node, ast.Compare)
                    and any(_name(c).endswith(".metadata") for c in node.comparators)
                )
            ):
                lines.append(getattr(node, "lineno", 0))
        if lines:
            out.append(Home(mod.path, min(lines), f"{len(lines)} uses of the flow's metadata"))
    return out


def monkeypatched_methods(mods: list[Module]) -> list[Home]:
    """A method bound onto another object by assignment: `obj.name = MethodType(...)` or a lambda."""
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.Assign):
            value = node.value
            bound = isinstance(value, ast.Lambda) or (
                isinstance(value, ast.Call) and _name(value.func) in {"MethodType", "types.MethodType"}
            )
            for target in node.targets:
                if bound and isinstance(target, ast.Attribute) and _name(target.value) != "self":
                    out.append(Home(mod.path, node.lineno, f"{_name(target)} = ..."))
    return out


def private_imports(mods: list[Module]) -> list[Home]:
    """`from ours import _name`: one module reaching into another's private names."""
    ours = {mod.package for mod in mods}
    out = []
    for mod, node in _walk(mods):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ours:
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(Home(mod.path, node.lineno, f"from {node.module} import {alias.name}"))
    return out


def rows_readers(mods: list[Module]) -> list[Home]:
    """A module-level reader of raw SQL rows: a function that executes `text(sql)` and makes each row a
    dict (`dict(r._mapping)`), like the two `_rows` that `storage.lookups` and `storage.mcp_lookups`
    each had."""
    out = []
    for mod in mods:
        for fn in mod.tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            texts = any(_name(c.func) in {"text", "sqlalchemy.text"} for c in calls)
            mapped = any(
                _name(c.func) == "dict"
                and c.args
                and isinstance(c.args[0], ast.Attribute)
                and c.args[0].attr == "_mapping"
                for c in calls
            )
            if texts and mapped:
                out.append(Home(mod.path, fn.lineno, f"def {fn.name}"))
    return out


def normalize_host_functions(mods: list[Module]) -> list[Home]:
    """A function named `*normalize_host*`."""
    return [
        Home(mod.path, fn.lineno, f"def {fn.name}")
        for mod, fn in _functions(mods)
        if "normalize_host" in fn.name
    ]


def model_endpoint_lists(mods: list[Module]) -> list[Home]:
    """A literal collection holding a model API's path (`.../chat/completions`)."""
    out = []
    for mod, node in _walk(mods):
        endpoints = [s for s in _strings(node) if s.endswith("chat/completions")]
        if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) and endpoints:
            out.append(Home(mod.path, node.lineno, "model endpoints"))
    # a row of a table (a tuple in a tuple) is one list, not one per row
    rows = {(h.path, h.line) for h in out}
    nested = set()
    for mod, node in _walk(mods):
        if isinstance(node, ast.Tuple | ast.List) and (mod.path, node.lineno) not in rows:
            for elt in node.elts:
                if (mod.path, elt.lineno) in rows and isinstance(elt, ast.Tuple):
                    nested.add((mod.path, elt.lineno))
                    out.append(Home(mod.path, node.lineno, "model endpoints"))
    return sorted({h for h in out if (h.path, h.line) not in nested})


def key_file_writers(mods: list[Module]) -> list[Home]:
    """A function that creates a file only when there is none (`O_EXCL`) and writes into it: a
    secret key or token made once (`private_file`, which writes nothing, is not one)."""
    out = []
    for mod, fn in _functions(mods):
        excl = any(isinstance(n, ast.Attribute) and n.attr == "O_EXCL" for n in ast.walk(fn))
        writes = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "write"
            for n in ast.walk(fn)
        )
        if excl and writes:
            out.append(Home(mod.path, fn.lineno, f"def {fn.name}"))
    return out


def tool_call_readers(mods: list[Module]) -> list[Home]:
    """A function that compares a method with `"tools/call"` (or the constant naming it, `TOOLS_CALL`):
    a reader of MCP tool calls. One home per module: a reader and its helpers are one home."""
    out: list[Home] = []
    for mod, fn in _functions(mods):
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(
                    (isinstance(c, ast.Constant) and c.value == "tools/call")
                    or _name(c).endswith("TOOLS_CALL")
                    for c in sides
                ):
                    if mod.path not in {h.path for h in out}:
                        out.append(Home(mod.path, fn.lineno, f"def {fn.name}"))
                    break
    return out


FACTS: dict[str, Finder] = {
    "duration parsers": duration_parsers,
    "form-name lists": form_name_lists,
    "error roots": error_roots,
    "environment resolvers": environment_resolvers,
    "stream grace defaults": stream_grace_defaults,
    "option declarations": option_declarations,
    "hand-mapped options": hand_mapped_options,
    "flow metadata (META_*) users": flow_metadata_users,
    "monkeypatched methods": monkeypatched_methods,
    "imports of private names": private_imports,
    "_rows readers": rows_readers,
    "normalize_host functions": normalize_host_functions,
    "model-endpoint lists": model_endpoint_lists,
    "key-file writers": key_file_writers,
    "tools/call readers": tool_call_readers,
}
"""Each fact and its finder, in the order the figures print them."""


# --- the figures ----------------------------------------------------------------------------------


def _imports_mitmproxy(mod: Module) -> bool:
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "mitmproxy" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mitmproxy":
            return True
    return False


def is_face(mod: Module) -> bool:
    """A package's face: an `__init__.py` holding only a docstring, imports and `__all__`."""
    if not mod.path.endswith("__init__.py"):
        return False
    for node in mod.tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and [_name(t) for t in node.targets] == ["__all__"]:
            continue
        return False
    return True


def addons_without_mitmproxy(mods: list[Module]) -> list[Module]:
    """Modules under addons/ that never import mitmproxy and are not a package's face."""
    return [m for m in mods if m.package == "addons" and not _imports_mitmproxy(m) and not is_face(m)]


def report(mods: list[Module], homes: bool = False, largest: int = 12) -> list[str]:
    """The lines to print: packages, the largest modules, addons' modules without mitmproxy, the facts."""
    out = ["package       modules   lines"]
    by_package: dict[str, list[Module]] = {}
    for mod in mods:
        by_package.setdefault(mod.package, []).append(mod)
    for package, group in by_package.items():
        out.append(f"{package:<12} {len(group):>8} {sum(m.lines for m in group):>7}")
    out.append(f"{'total':<12} {len(mods):>8} {sum(m.lines for m in mods):>7}")
    out.append("")
    out.append(f"the {largest} largest modules")
    for mod in sorted(mods, key=lambda m: -m.lines)[:largest]:
        out.append(f"  {mod.lines:>5} {mod.path}")
    out.append(f"modules over 400 lines: {sum(1 for m in mods if m.lines > 400)}")
    stray = addons_without_mitmproxy(mods)
    out.append(
        f"addons/ modules that never import mitmproxy: {len(stray)} of "
        f"{sum(1 for m in mods if m.package == 'addons')} ({sum(m.lines for m in stray)} lines)"
    )
    out.append("")
    out.append("fact                              homes")
    for fact, finder in FACTS.items():
        found = finder(mods)
        out.append(f"{fact:<33} {len(found):>5}")
        if homes:
            out += [f"    {home}" for home in sorted(found)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", metavar="REV", help="a commit to read instead of the working tree")
    parser.add_argument("--homes", action="store_true", help="name each home of each fact")
    args = parser.parse_args(argv)
    if args.at is None:
        lines = report(modules(ROOT), args.homes)
    else:
        with tempfile.TemporaryDirectory(prefix="house-") as tmp:
            try:
                root = checkout(args.at, Path(tmp))
            except subprocess.CalledProcessError as e:
                print(f"house: cannot read {args.at}: {e.stderr.decode().strip()}", file=sys.stderr)
                return 2
            lines = [f"at {args.at}", *report(modules(root), args.homes)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
