"""The Directory: every capability as a row, kept in revisions, listed from a derived index.

The Python API other parts of flightlog use (names are stable):

    directory = open_directory(ledger_url, folder=None)   # seeded from `folder`, or the starter
    directory.rows(bundle=None) -> list[Row]               # manifest order
    directory.bundles() -> list[str]
    directory.row(id_or_name) -> Row                       # UnknownRow if absent
    directory.document(id_or_name) -> Document             # whole text, frontmatter, body
    directory.tool(name) -> Document                       # a row of bundle `tool`, by name or id
                                                           # (a row elsewhere: UnknownRow saying why)
    directory.find(query, k=10, bundle=None) -> list[Hit]  # the resolver
    directory.write(bundle, path, content, replaces=None) -> Committed
    directory.delete(bundle, path, replaces) -> Committed
    directory.transact(changes, expected_revision=None) -> Committed   # 1..1,000 changes, all or none
    directory.history(before=None, limit=20) -> list[Revision]
    directory.restore(revision, expected_revision) -> Committed
    directory.snapshot() -> Snapshot                       # digest, concepts, revision
    directory.export(folder) -> int
    directory.close()

A change for `transact` is `{"operation": "write", "bundle", "path", "content", "replaces"?}` or
`{"operation": "delete", "bundle", "path", "replaces"}`. Refusals raise `Refused` whose message ends
with `retry with replaces: "H"` when retrying with that hash is the fix; an indeterminate commit
raises `Indeterminate` and never offers a retry.

Storage: the revision store of `storage.documents`, in the Ledger's database (SQLite or
PostgreSQL). A Directory opened on a folder lives in its own space of the store, named after the
folder; every open syncs the bundles whose files changed, and every commit is written through
to the folder, so the folder stays the Directory's readable form. Without a folder, the native
space is seeded from the starter Directory on first open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from catalog import changes as changeset
from catalog.aliases import Aliases, resolve_aliases
from catalog.document import Document, parse
from catalog.errors import BadFolder, NotCallable, StoreFailed, UnknownRow
from catalog.folder import export, place, stat_tags
from catalog.folder_sync import sync_folder
from catalog.index import Index, Row
from catalog.index_load import guarded, load_index

if TYPE_CHECKING:
    from catalog.folder_watch import Follower
from catalog.resolver import Hit, Resolver
from storage.documents import (
    Change,
    DocumentStore,
    DocumentStoreError,
    Revision,
    open_document_store,
)
from storage.documents import snapshot_digest as _digest

NATIVE_SPACE: Final = "native"
TOOL_BUNDLE: Final = "tool"

__all__ = ["Committed", "Directory", "Hit", "Revision", "Row", "Snapshot", "open_directory", "starter_folder"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The digest of the Directory's current content, its row count and head revision."""

    digest: str
    concepts: int
    revision: int


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed revision: what it did, the new snapshot, and warnings about what was written."""

    revision: int
    snapshot: str
    concepts: int
    written: int
    deleted: int
    hashes: dict[str, str | None]
    warnings: tuple[str, ...]


def starter_folder() -> Path:
    """The starter Directory shipped with flightlog: tool rows for its own routes."""
    from importlib import resources  # here: it imports tempfile and random, which a find never needs

    return Path(str(resources.files("catalog") / "starter"))


class Directory:
    """One Directory over its space of the revision store. Reads refresh from the head first."""

    def __init__(
        self, store: DocumentStore, *, folder: Path | None = None, owns_engine: bool = False, cores: int = 1
    ) -> None:
        self._store = store
        self.cores = cores
        """Processes a load may compile new sections on (`catalog.compile_jobs`): the caller knows
        what this process may use (`flightlog.cores`); 1 compiles them here, in turn."""
        self.folder = folder
        self.name = folder.name if folder is not None else "flightlog"
        self._owns_engine = owns_engine
        self._head = -1
        self._tags: dict[str, str] = {}
        self._index = Index([])
        self._aliases: Aliases = {}
        self._resolver = Resolver(self._index)
        self.rebuilt: tuple[str, ...] = ()
        """The sections whose index the last load had to rebuild (for tests and the benchmark)."""
        self.warnings: tuple[str, ...] = ()
        self.network = False
        """True for a Directory a network door serves: its commits never touch a row that runs a
        command or code here (`catalog.local_rows`); the operator's own opens leave it False."""
        self.alias_problems: tuple[str, ...] = ()
        """Every alias entry or pattern that names no row (skipped, never fatal: `directory check`)."""
        self._follower: Follower | None = None

    # ---- loading -----------------------------------------------------------------------------

    def follow(self) -> None:
        """Keep up with the folder for as long as this Directory is open (`catalog.folder_watch`):
        a process serving it for long (the proxy, `flightlog mcp`) sees an edit at its next call."""
        from catalog.folder_watch import Follower  # deferred: only long-lived servers follow a folder

        if self.folder is not None and self._follower is None:
            self._follower = Follower(self.folder, self.sync)

    def refresh(self) -> None:
        """Reload the sections that changed since the last read (one small read when none did); a
        followed folder is synced first when its watch saw a change."""
        if self._follower is not None:
            self._follower.catch_up()
        head = self._guard(self._store.head)
        if head != self._head:
            self._load(head)

    def _load(self, head: int) -> None:
        tags = guarded(self._store.sections)
        loaded = load_index(self._store, tags, self._index, self.cores)
        index, aliases = loaded.index, loaded.aliases
        self._resolver = Resolver(index, lambda: resolve_aliases(aliases, index))
        self._index, self._aliases, self._tags = index, aliases, tags
        self._head, self.rebuilt, self.warnings = head, loaded.rebuilt, loaded.warnings
        self.alias_problems = loaded.problems

    def _texts(self, hashes: Sequence[str]) -> dict[str, str]:
        return guarded(lambda: self._store.contents(hashes))

    def _guard(self, call: Any) -> Any:
        return guarded(call)

    # ---- reads -------------------------------------------------------------------------------

    @property
    def index(self) -> Index:
        self.refresh()
        return self._index

    @property
    def aliases(self) -> Aliases:
        self.refresh()
        return dict(self._aliases)

    def bundles(self) -> list[str]:
        return list(self.index.sections)

    def rows(self, bundle: str | None = None) -> list[Row]:
        index = self.index
        if bundle is not None and bundle not in index.sections:
            return []
        return index.rows(bundle)

    def row(self, key: str) -> Row:
        index = self.index
        found = index.locate(key)
        if found is None:
            raise UnknownRow(f'no row is called "{key}" (ids come from the manifest; never guess one)')
        return index.row(*found)

    def texts(self, rows: Sequence[Row]) -> dict[str, str]:
        """The whole texts of some rows by id, in one targeted read."""
        found = self._guard(lambda: self._store.contents(r.hash for r in rows))
        return {r.id: found[r.hash] for r in rows if r.hash in found}

    def document(self, key: str) -> Document:
        row = self.row(key)
        text = self.texts([row])[row.id]
        front, body, warnings = parse(text)
        return Document(row.bundle, row.path, text, row.hash, row.id, front, body, tuple(warnings))

    def tool(self, name: str) -> Document:
        """A tool row by its name (case-insensitive) or id; `UnknownRow` when there is none."""
        index = self.index
        named = [k for k in index.named(name) if k[0] == TOOL_BUNDLE]
        found = named[0] if len(named) == 1 else index.locate(name)
        if found is None:
            raise UnknownRow(f'no tool is called "{name}"')
        doc = self.document(index.id_of(*found))
        if doc.bundle != TOOL_BUNDLE:  # found and shown by `find` and `get`, yet not callable: say why
            file = doc.path.rsplit("/", 1)[-1]
            raise NotCallable(
                f'"{name}" is the row {doc.bundle}/{doc.path}, and only rows in {TOOL_BUNDLE}/ are callable: '
                f"move its file to {TOOL_BUNDLE}/{file} in the Directory folder"
            )
        return doc

    def current_hash(self, bundle: str, path: str) -> str | None:
        """The current hash of the document at `bundle/path` (None when there is none)."""
        return self._guard(lambda: self._store.hash_of(bundle, path))

    def text_at(self, bundle: str, path: str) -> str | None:
        """The current text of the document at `bundle/path` (None when there is none)."""
        sha = self.current_hash(bundle, path)
        return None if sha is None else self.text_of(sha)

    def text_of(self, sha: str) -> str | None:
        """The text of any version the store keeps, by its hash (a row as it was at a revision)."""
        return self._guard(lambda: self._store.contents([sha])).get(sha)

    def restore_changes(self, revision: int) -> list[Change]:
        """The changes `restore(revision, ...)` would commit now (what the gate judges first)."""
        self.refresh()
        return changeset.restore_changes(self._store, revision, self._head)

    def find(self, query: str, k: int = 10, bundle: str | None = None) -> list[Hit]:
        self.refresh()
        return self._resolver.find(query, k=k, bundle=bundle)

    def snapshot(self) -> Snapshot:
        self.refresh()
        return Snapshot(_digest(self._tags.items()), len(self._index), self._head)

    @property
    def revision(self) -> int:
        self.refresh()
        return self._head

    def history(self, before: int | None = None, limit: int = 20) -> list[Revision]:
        return list(self._guard(lambda: self._store.history(before=before, limit=max(1, min(100, limit)))))

    # ---- writes ------------------------------------------------------------------------------

    def write(self, bundle: str, path: str, content: str, replaces: str | None = None) -> Committed:
        change = {
            "operation": "write",
            "bundle": bundle,
            "path": path,
            "content": content,
            "replaces": replaces,
        }
        return self._commit([changeset.parse_change(change)], None, f"write {bundle}/{path}", single=True)

    def delete(self, bundle: str, path: str, replaces: str | None) -> Committed:
        change = {"operation": "delete", "bundle": bundle, "path": path, "replaces": replaces}
        return self._commit([changeset.parse_change(change)], None, f"delete {bundle}/{path}", single=True)

    def transact(
        self, changes: Sequence[Mapping[str, Any]], expected_revision: int | None = None, message: str = ""
    ) -> Committed:
        parsed = changeset.parse_changes(changes)
        return self._commit(parsed, expected_revision, message or f"transact {len(parsed)} changes")

    def restore(self, revision: int, expected_revision: int) -> Committed:
        """A new revision (child of the head) whose content equals `revision`'s."""
        return self._commit(self.restore_changes(revision), expected_revision, f"restore revision {revision}")

    def _commit(
        self, changes: list[Change], expected: int | None, message: str, *, single: bool = False
    ) -> Committed:
        self.refresh()
        if self.network:
            from catalog.local_rows import refuse_local_changes  # deferred: it loads the contracts

            refuse_local_changes(changes, self.text_at)
        warnings = changeset.check_aliases(changes, self._index, self._aliases)
        commit = changeset.commit(self._store, changes, expected, message, single=single)
        if self.folder is not None:
            warnings += self._write_through(changes)
        self.refresh()
        hashes = changeset.hashes(changes)
        return Committed(
            commit.revision,
            commit.snapshot,
            len(self._index),
            commit.written,
            commit.deleted,
            hashes,
            tuple(warnings),
        )

    def _write_through(self, changes: Sequence[Change]) -> list[str]:
        assert self.folder is not None
        try:
            for c in changes:
                place(self.folder, c.bundle, c.path, c.content)
            self._guard(
                lambda: self._store.save_folder_tags(
                    {**self._store.folder_tags(), **stat_tags(self.folder, {c.bundle for c in changes})}
                )
            )
        except BadFolder as e:
            return [f"committed, but the folder copy failed: {e}"]
        return []

    # ---- the folder form ---------------------------------------------------------------------

    def sync(
        self,
        folder: Path,
        *,
        message: str = "sync from folder",
        remember: bool = True,
    ) -> int:
        """Commit what changed in `folder` since it was last synced; returns the changes committed.

        One scan stats every file; only the bundles whose stat tag moved are read."""
        count = sync_folder(self._store, folder, message=message, remember=remember)
        self.refresh()
        return count

    def export(self, folder: Path) -> int:
        """Write the Directory's current documents into `folder`; returns how many."""
        tree = self._guard(self._store.tree)
        texts = self._guard(lambda: self._store.contents(tree.values()))
        return export(folder, ((b, p, texts[h]) for (b, p), h in sorted(tree.items())))

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
            self._follower = None
        if self._owns_engine:
            self._store.close()


def open_directory(
    ledger_url: str,
    folder: Path | str | None = None,
    *,
    cores: int = 1,
) -> Directory:
    """Open the Directory in the Ledger's database: the folder's space, or the native one.

    The native space is seeded from the starter Directory on first open; a folder's space is
    synced from the folder (only the bundles whose files changed). An alias that names no row is
    skipped and listed in `alias_problems`, never fatal. `cores`: see `Directory.cores`.
    """
    path = Path(folder).expanduser().resolve() if folder is not None else None
    space = f"folder:{path}" if path is not None else NATIVE_SPACE
    try:
        store = open_document_store(ledger_url, space)
    except DocumentStoreError as e:
        raise StoreFailed(str(e)) from e
    directory = Directory(store, folder=path, owns_engine=True, cores=cores)
    try:
        if path is not None:
            directory.sync(path)
        elif store.head() == 0:
            try:
                directory.sync(starter_folder(), message="starter directory", remember=False)
            except StoreFailed:
                if store.head() == 0:  # not another process seeding it at the same moment
                    raise
                directory.refresh()
        else:
            directory.refresh()
    except BaseException:
        directory.close()
        raise
    return directory
