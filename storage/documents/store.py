"""The Directory's revision store: documents kept by content hash, committed in numbered revisions.

The store knows nothing about Markdown or rows; it keeps text documents addressed by
`(bundle, path)` inside a named *space* (one Directory), and commits changes to them in revisions:

- `directory_documents`: every document text ever committed, once, under its SHA-256.
- `directory_refs`: the head revision of each space (the row a commit locks first).
- `directory_revisions` / `directory_changes`: the history, append-only by use: a revision lists the
  documents it wrote (hash) or deleted (NULL hash). Any past state is a query over changes.
- `directory_tree`: the head state, one row per live document (derived from changes, kept for speed).
- `directory_sections`: the version tag (hash of its `(path, hash)` list) of each bundle at head.
- `directory_index`: derived read models, one per section, with the tag they were built from.
- `directory_folders`: for a space seeded from a folder, a cheap stat tag per bundle subfolder.

A commit is one transaction: it bumps the head first (taking the write lock on both engines),
checks every precondition against the locked head, then writes. A failure before the final COMMIT
rolls back and is reported as such; a failure *during* COMMIT is reported as `IndeterminateCommit`
because nobody can say whether it landed.

`DocumentStore` is the one interface; where it runs: on a SQLite Ledger already at the newest
schema, reads (`storage.documents.reads`) and writes (`storage.documents.writes`) with the standard
library, so neither opening a Directory nor changing it pays for importing SQLAlchemy; history, and
everything on PostgreSQL or on a file that needs creating or migrating, over SQLAlchemy
(`storage.documents.sql`, imported on first use), whose reads and writes are the same
`PlainReads` and `DocumentWrites` on the pool's driver connections: one implementation of each.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from storage.documents.model import (
    Change,
    Commit,
    DocumentStoreError,
    Revision,
)
from storage.documents.reads import PlainReads, open_sqlite_reads, sqlite_file
from storage.documents.writes import DocumentWrites
from storage.sqlite_setup import LentConnection

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from storage.documents.sql import SqlStore


class DocumentStore:
    """One space of the revision store: reads on `reads`, everything else on SQLAlchemy (opened on
    first use when the store was opened on the stdlib reads)."""

    def __init__(
        self, url: str, space: str, *, reads: PlainReads | None = None, sql: SqlStore | None = None
    ) -> None:
        self.url = url
        self.space = space
        self._sql = sql
        self._reads: PlainReads | None = reads or (sql.reads if sql is not None else None)
        self._writes: DocumentWrites | None = None
        self._lent: LentConnection | None = None
        self._file = sqlite_file(url) if reads is not None else None
        """The SQLite file of a store opened on the stdlib reads, whose writes are stdlib too."""

    @property
    def sql(self) -> SqlStore:
        """The SQLAlchemy store of this space (engine made, schema already current)."""
        if self._sql is None:
            from storage.documents.sql import SqlStore
            from storage.engine import make_engine

            self._sql = SqlStore(make_engine(self.url), self.space)
        return self._sql

    @property
    def writes(self) -> DocumentWrites:
        """The write path: on the stdlib connection when the store was opened on the stdlib reads,
        else on the SQLAlchemy store's pool."""
        if self._writes is None:
            if self._file is None:
                self._writes = self.sql.writes
            else:
                self._lent = LentConnection(self._file)
                self._writes = DocumentWrites(self._lent.lend, True, self.space, (sqlite3.Error,))
        return self._writes

    @property
    def engine(self) -> Engine:
        return self.sql.engine

    @property
    def reads(self) -> PlainReads:
        return self._reads or self.sql.reads

    # ---- reads -------------------------------------------------------------------------------

    def head(self) -> int:
        """The head revision (0 for a space nothing was ever committed to)."""
        return self.reads.head()

    def sections(self) -> dict[str, str]:
        """Each bundle's version tag at head."""
        return self.reads.sections()

    def index_data(self, bundles: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """The stored derived index of some sections: `bundle -> (tag, data)`."""
        return self.reads.index_data(bundles)

    def tree(self, bundle: str | None = None) -> dict[tuple[str, str], str]:
        """The head state: `(bundle, path) -> hash`, optionally for one bundle."""
        return self.reads.tree(bundle)

    def tree_at(self, revision: int) -> dict[tuple[str, str], str]:
        """The state as of `revision`: for every path, its latest change at or before it."""
        return self.sql.tree_at(revision)

    def hash_of(self, bundle: str, path: str) -> str | None:
        """The current hash of one document, or None when it does not exist."""
        return self.reads.hash_of(bundle, path)

    def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Document texts by hash (one targeted read)."""
        return self.reads.contents(hashes)

    def bundle_documents(self, bundle: str) -> list[tuple[str, str, str]]:
        """Every live document of one bundle as `(path, hash, text)`, sorted by path."""
        return self.reads.bundle_documents(bundle)

    def history(self, before: int | None = None, limit: int = 20) -> list[Revision]:
        """Committed revisions, newest first, strictly below `before` when given."""
        return self.sql.history(before=before, limit=limit)

    def folder_tags(self) -> dict[str, str]:
        """The stat tag of every bundle subfolder last synced into this space."""
        return self.reads.folder_tags()

    # ---- writes ------------------------------------------------------------------------------

    def save_index(self, bundle: str, tag: str, data: bytes) -> None:
        """Keep the derived index of one section, built from the section at `tag`."""
        self.writes.save_index(bundle, tag, data)

    def save_folder_tags(self, tags: dict[str, str]) -> None:
        """Remember the stat tags of the folder just synced."""
        self.writes.save_folder_tags(tags)

    def commit(self, changes: Sequence[Change], *, expected: int | None = None, message: str = "") -> Commit:
        """Commit `changes` as one revision, all or nothing (see `storage.documents.writes`)."""
        return self.writes.commit(changes, expected=expected, message=message)

    def close(self) -> None:
        """Close the reads' connection and dispose of the engine (when one was made)."""
        if self._reads is not None:
            self._reads.close()
        if self._lent is not None:
            self._lent.close()
        if self._sql is not None:
            self._sql.close()


def open_document_store(url: str, space: str) -> DocumentStore:
    """A store of `space` in the Ledger's `url`, the schema created or migrated first.

    A SQLite file already at the newest revision opens on the stdlib reads (nothing of SQLAlchemy
    or alembic is imported until something is written); anything else opens an engine and runs
    `storage.migrate.migrate`, which skips alembic when the schema is current.
    """
    reads = open_sqlite_reads(url, space)
    if reads is not None:
        return DocumentStore(url, space, reads=reads)
    from sqlalchemy.exc import SQLAlchemyError

    from storage.documents.sql import SqlStore
    from storage.engine import make_engine
    from storage.migrate import migrate

    engine = make_engine(url)
    try:
        migrate(engine)
    except SQLAlchemyError as e:
        engine.dispose()
        raise DocumentStoreError(f"cannot open the directory store at {url}: {e}".splitlines()[0]) from e
    return DocumentStore(url, space, sql=SqlStore(engine, space))
