"""The Directory's on-disk form: a folder, one subfolder per bundle, one Markdown document per row.

    DIR/aliases.toml         everyday words -> name patterns (optional)
    DIR/tool/ledger_row.md   a row of bundle `tool`, path `ledger_row.md`
    DIR/article/a/b.md       a row of bundle `article`, path `a/b.md`

Scanning is cheap enough to run on every open: a bundle's *stat tag* (names, sizes, mtimes) says
whether any file of it changed, and only changed bundles are read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection, Iterable
from functools import cached_property
from pathlib import Path
from typing import Final

from catalog.errors import BadFolder, BadPath

ROOT_BUNDLE: Final = ""
"""The store's bundle for files at the folder's root (only `aliases.toml`)."""
ALIASES_PATH: Final = "aliases.toml"
"""Where the alias table lives: the root of the Directory folder (bundle "" in the store). Defined
here, not in `catalog.aliases`, so the folder check a forked child runs (`catalog.prescan`) imports
neither the alias table's reader nor the index."""
_BUNDLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SEGMENT = re.compile(r"^[^/\\\x00]+$")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""What ends a line or a cell of the tab-separated text agents read (the manifest, search, find):
the C0 and C1 controls (tab, newline, NEL among them) and the Unicode line and paragraph
separators. A row's id is its path, so a file named `x<newline>forged<tab>...` showed every agent
a row that does not exist, with whatever summary the name spelled out."""


def unsafe_path(path: str) -> bool:
    """Whether a document path holds what ends a line or a cell of the text agents read (`_UNSAFE`)."""
    return _UNSAFE.search(path) is not None


class BundleFiles:
    """One bundle subfolder: its stat tag, its documents by path, and each one's (size, mtime_ns).

    An open whose tags all equal the stored ones uses the tags alone, so the two tables (~11 ms at
    25,000 files) are built only when a changed bundle asks for them."""

    def __init__(self, stat_tag: str, found: list[tuple[str, str, int, int]]) -> None:
        self.stat_tag = stat_tag
        self._found = found
        """(path, full path, size, mtime_ns) of every document, in path order."""

    @cached_property
    def files(self) -> dict[str, str]:
        return {rel: full for rel, full, _, _ in self._found}

    @cached_property
    def stats(self) -> dict[str, tuple[int, int]]:
        return {rel: (size, mtime) for rel, _, size, mtime in self._found}


def check_target(bundle: str, path: str) -> None:
    """Refuse anything that is not a document of a bundle (or the root `aliases.toml`)."""
    if bundle == ROOT_BUNDLE:
        if path != ALIASES_PATH:
            raise BadPath(f'refused: "{path}" is not a document: only {ALIASES_PATH} lives at the root')
        return
    if not _BUNDLE.match(bundle):
        raise BadPath(f'refused: "{bundle}" is not a bundle name (letters, digits, _ . -)')
    parts = path.split("/")
    if (
        not path.endswith(".md")
        or path.startswith("/")
        or any(p in ("", ".", "..") or p.startswith(".") or not _SEGMENT.match(p) for p in parts)
    ):
        raise BadPath(f'refused: "{bundle}/{path}" is not a document path (a relative path ending in .md)')
    if unsafe_path(path):
        raise BadPath(
            f"refused: {bundle + '/' + path!a} holds a tab, a line break or another control character"
            " (a row's path is its id, written into tab-separated lines)"
        )


def scan(folder: Path, bundles: Collection[str] | None = None) -> dict[str, BundleFiles]:
    """Every bundle of `folder` with its stat tag and files (root `aliases.toml` as bundle ""), or
    only those of `bundles` that are there."""
    if not folder.is_dir():
        raise BadFolder(f"directory folder {folder} does not exist or is not a folder")
    out: dict[str, BundleFiles] = {}
    aliases = folder / ALIASES_PATH
    if (bundles is None or ROOT_BUNDLE in bundles) and aliases.is_file():
        try:
            st = os.stat(aliases)
        except OSError as e:
            raise BadFolder(f"cannot read {aliases}: {e.strerror}") from e
        stat = (st.st_size, st.st_mtime_ns)
        out[ROOT_BUNDLE] = BundleFiles(_tag([(ALIASES_PATH, *stat)]), [(ALIASES_PATH, str(aliases), *stat)])
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise BadFolder(f"cannot read directory folder {folder}: {e.strerror}") from e
    for entry in entries:
        wanted = bundles is None or entry.name in bundles
        if wanted and entry.is_dir() and _BUNDLE.match(entry.name):
            out[entry.name] = _documents(Path(entry.path))
    return out


def _documents(root: Path) -> BundleFiles:
    """Every `.md` file under `root` by its posix path relative to it (dot-names skipped), and
    the stat tag of them all (path, size, mtime).

    Every open of a folder runs this over every file (a file edited in place changes its own
    mtime only, never its folder's), so the loop does no more than one stat per file: the tag is
    one hash over one joined string, not an update per file."""
    found: list[tuple[str, str, int, int]] = []
    stack = [("", str(root))]
    try:
        while stack:
            prefix, path = stack.pop()
            with os.scandir(path) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    if entry.is_dir():
                        stack.append((f"{prefix}{name}/", entry.path))
                    elif name.endswith(".md"):
                        st = entry.stat()
                        found.append((prefix + name, entry.path, st.st_size, st.st_mtime_ns))
    except OSError as e:
        raise BadFolder(f"cannot read {e.filename or root}: {e.strerror}") from e
    found.sort()
    try:
        tag = _tag([(rel, size, mtime) for rel, _, size, mtime in found])
    except UnicodeEncodeError as e:  # a name the file system holds as bytes that are not UTF-8
        bad = next(full for rel, full, _, _ in found if not _utf8(rel))
        raise BadFolder(f"{bad!a} is not a UTF-8 file name: rename it (a row's path is text)") from e
    # Every open checks every name: joined and `isprintable` (False for every character `_UNSAFE`
    # names) take ~2 ms at 25,000 names, the pattern alone 4 more; it runs only on a name that fails.
    joined = "/".join([rel for rel, _, _, _ in found])
    if not joined.isprintable() and unsafe_path(joined):
        bad = next(full for rel, full, _, _ in found if unsafe_path(rel))
        raise BadFolder(
            f"{bad!a} holds a tab, a line break or another control character: rename it"
            " (a row's path is its id, written into tab-separated lines)"
        )
    return BundleFiles(tag, found)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _tag(files: Iterable[tuple[str, int, int]]) -> str:
    """The stat tag of some (path, size, mtime_ns), in path order: one hash over one string."""
    listing = "".join([f"{rel}\0{size}\0{mtime}\n" for rel, size, mtime in files])
    return hashlib.sha256(listing.encode()).hexdigest()


def read_text(path: str) -> str:
    """A document's text, exactly (UTF-8; newlines kept as written)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BadFolder(f"cannot read {path}: {e}") from e


def stat_tags(folder: Path, bundles: Iterable[str]) -> dict[str, str]:
    """The stat tags of some bundles as they are now (after a write-through)."""
    scanned = scan(folder)
    return {b: scanned[b].stat_tag for b in bundles if b in scanned}


def place(folder: Path, bundle: str, path: str, content: str | None) -> None:
    """Write one document into the folder (or remove it when `content` is None)."""
    target = folder / path if bundle == ROOT_BUNDLE else folder / bundle / path
    try:
        if content is None:
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8", newline="") as f:
            f.write(content)
    except OSError as e:
        raise BadFolder(f"cannot write {target}: {e.strerror}") from e


def export(folder: Path, documents: Iterable[tuple[str, str, str]]) -> int:
    """Write every `(bundle, path, text)` into `folder` (created if needed); returns the count."""
    n = 0
    for bundle, path, text in documents:
        place(folder, bundle, path, text)
        n += 1
    return n
