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
from collections.abc import Collection, Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Final

from catalog.errors import BadFolder, BadPath

ROOT_BUNDLE: Final = ""
"""The store's bundle for files at the folder's root (only `aliases.toml`)."""
ALIASES_PATH: Final = "aliases.toml"
"""Where the alias table lives: the root of the Directory folder (bundle "" in the store)."""
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

    An open whose tags all equal the stored ones uses the tags alone, so the two tables are built
    only when a changed bundle asks for them."""

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
    out: dict[str, BundleFiles] = {}
    for bundle, listed in _bundles(folder, bundles):
        stated = _stated(listed)
        out[bundle] = BundleFiles(_stat_tag(stated), [f for f in stated if f is not None])
    return out


def _bundles(folder: Path, bundles: Collection[str] | None) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """Each wanted bundle with its documents' (path, full path), in path order: named, not stat'ed."""
    if not folder.is_dir():
        raise BadFolder(f"directory folder {folder} does not exist or is not a folder")
    aliases = folder / ALIASES_PATH
    if (bundles is None or ROOT_BUNDLE in bundles) and aliases.is_file():
        yield ROOT_BUNDLE, [(ALIASES_PATH, str(aliases))]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise BadFolder(f"cannot read directory folder {folder}: {e.strerror}") from e
    for entry in entries:
        wanted = bundles is None or entry.name in bundles
        if wanted and entry.is_dir() and _BUNDLE.match(entry.name):
            yield entry.name, _documents(Path(entry.path))


def _documents(root: Path) -> list[tuple[str, str]]:
    """Every `.md` file under `root` by its posix path relative to it (dot-names skipped), with its
    full path, in path order; refused when a name is not UTF-8 or holds a control character.

    Every open of a folder runs this over every file: the names come from reading the folders
    alone (no stat), and every name is checked at once, not one by one."""
    found: list[tuple[str, str]] = []
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
                        found.append((prefix + name, entry.path))
    except OSError as e:
        raise BadFolder(f"cannot read {e.filename or root}: {e.strerror}") from e
    found.sort()
    joined = "/".join([rel for rel, _ in found])
    try:
        joined.encode()
    except UnicodeEncodeError as e:  # a name the file system holds as bytes that are not UTF-8
        bad = next(full for rel, full in found if not _utf8(rel))
        raise BadFolder(f"{bad!a} is not a UTF-8 file name: rename it (a row's path is text)") from e
    if unsafe_path(joined):
        bad = next(full for rel, full in found if unsafe_path(rel))
        raise BadFolder(
            f"{bad!a} holds a tab, a line break or another control character: rename it"
            " (a row's path is its id, written into tab-separated lines)"
        )
    return found


Stated = list[tuple[str, str, int, int] | None]
"""(path, full path, size, mtime_ns) of each listed document, None for one gone since it was listed."""


def _stated(listed: Sequence[tuple[str, str]]) -> Stated:
    """Each listed document with its stat (a file edited in place changes its own mtime only, never
    its folder's: one stat each); one gone since it was listed is None, as a scan a moment later
    would not have found it."""
    found: Stated = []
    stat = os.stat
    for rel, full in listed:
        try:
            st = stat(full)
        except FileNotFoundError:
            found.append(None)
            continue
        except OSError as e:
            raise BadFolder(f"cannot read {full}: {e.strerror}") from e
        found.append((rel, full, st.st_size, st.st_mtime_ns))
    return found


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _stat_tag(files: Stated) -> str:
    """A bundle's stat tag: one hash over the (path, size, mtime_ns) of its files, in path order."""
    listing = "".join([f"{f[0]}\0{f[2]}\0{f[3]}\n" for f in files if f is not None])
    return hashlib.sha256(listing.encode()).hexdigest()


def read_text(path: str) -> str | None:
    """A document's text, exactly (UTF-8; newlines kept as written); None when the file is gone
    since the folder was scanned (an editor saving by rename, an agent removing it): the sync then
    counts it removed, as a scan a moment later would have, instead of failing the open."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise BadFolder(f"cannot read {path}: {e}") from e


def stat_tags(folder: Path, bundles: Iterable[str]) -> dict[str, str]:
    """The stat tags of some bundles as they are now (after a write-through): only those are
    stat'ed, not every file of the folder."""
    return {b: found.stat_tag for b, found in scan(folder, set(bundles)).items()}


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
