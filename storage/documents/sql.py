"""The revision store over SQLAlchemy: the queries and writes of `storage.documents` on both engines.

`storage.documents.DocumentStore` sends every write here, and every read too except on a SQLite
file already at the newest schema (`storage.documents.reads`, the standard library alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.documents.model import Change, Commit, DocumentStoreError, Revision, chunks
from storage.documents.tables import (
    changes_table,
    documents_table,
    folders_table,
    index_table,
    refs_table,
    revisions_table,
    sections_table,
    tree_table,
)
from storage.documents.writes import DocumentWrites


class SqlStore:
    """One space of the revision store over SQLAlchemy: every read and write, on both engines."""

    def __init__(self, engine: Engine, space: str) -> None:
        self.engine = engine
        self.space = space
        self.writes = DocumentWrites(
            self._lend, engine.dialect.name == "sqlite", space, (engine.dialect.loaded_dbapi.Error,)
        )
        """Every write, on the driver's connection the pool lends (`storage.documents.writes`)."""

    @contextmanager
    def _lend(self) -> Iterator[Any]:
        """The pool's next connection as the driver's own, given back (rolled back) after."""
        try:
            raw = self.engine.raw_connection()
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e
        try:
            yield raw.driver_connection
        finally:
            raw.close()

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e

    # ---- reads -------------------------------------------------------------------------------

    def head(self) -> int:
        """The head revision (0 for a space nothing was ever committed to)."""
        with self._read() as conn:
            value = conn.execute(
                sa.select(refs_table.c.revision).where(refs_table.c.space == self.space)
            ).scalar()
        return int(value or 0)

    def sections(self) -> dict[str, str]:
        """Each bundle's version tag at head."""
        with self._read() as conn:
            rows = conn.execute(
                sa.select(sections_table.c.bundle, sections_table.c.tag).where(
                    sections_table.c.space == self.space
                )
            )
            return {b: t for b, t in rows}

    def index_data(self, bundles: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """The stored derived index of some sections: `bundle -> (tag, data)`."""
        i = index_table
        out: dict[str, tuple[str, bytes]] = {}
        with self._read() as conn:
            for chunk in chunks(sorted(bundles), 200):
                query = sa.select(i.c.bundle, i.c.tag, i.c.data).where(
                    i.c.space == self.space, i.c.bundle.in_(chunk)
                )
                out.update({b: (t, bytes(d)) for b, t, d in conn.execute(query)})
        return out

    def save_index(self, bundle: str, tag: str, data: bytes) -> None:
        """Keep the derived index of one section, built from the section at `tag`."""
        self.writes.save_index(bundle, tag, data)

    def tree(self, bundle: str | None = None) -> dict[tuple[str, str], str]:
        """The head state: `(bundle, path) -> hash`, optionally for one bundle."""
        t = tree_table
        query = sa.select(t.c.bundle, t.c.path, t.c.sha256).where(t.c.space == self.space)
        if bundle is not None:
            query = query.where(t.c.bundle == bundle)
        with self._read() as conn:
            return {(b, p): h for b, p, h in conn.execute(query)}

    def tree_at(self, revision: int) -> dict[tuple[str, str], str]:
        """The state as of `revision`: for every path, its latest change at or before it."""
        c = changes_table
        latest = (
            sa.select(c.c.bundle, c.c.path, sa.func.max(c.c.revision).label("rev"))
            .where(c.c.space == self.space, c.c.revision <= revision)
            .group_by(c.c.bundle, c.c.path)
            .subquery()
        )
        query = sa.select(c.c.bundle, c.c.path, c.c.sha256).join(
            latest,
            sa.and_(c.c.bundle == latest.c.bundle, c.c.path == latest.c.path, c.c.revision == latest.c.rev),
        )
        query = query.where(c.c.space == self.space, c.c.sha256.is_not(None))
        with self._read() as conn:
            return {(b, p): h for b, p, h in conn.execute(query)}

    def hash_of(self, bundle: str, path: str) -> str | None:
        """The current hash of one document, or None when it does not exist."""
        t = tree_table
        query = sa.select(t.c.sha256).where(t.c.space == self.space, t.c.bundle == bundle, t.c.path == path)
        with self._read() as conn:
            value = conn.execute(query).scalar()
        return str(value) if value is not None else None

    def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Document texts by hash (one targeted read)."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        d = documents_table
        out: dict[str, str] = {}
        with self._read() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                for sha, text in conn.execute(
                    sa.select(d.c.sha256, d.c.content).where(d.c.sha256.in_(chunk))
                ):
                    out[sha] = text
        return out

    def bundle_documents(self, bundle: str) -> list[tuple[str, str, str]]:
        """Every live document of one bundle as `(path, hash, text)`, sorted by path."""
        t, d = tree_table, documents_table
        query = (
            sa.select(t.c.path, t.c.sha256, d.c.content)
            .join(d, d.c.sha256 == t.c.sha256)
            .where(t.c.space == self.space, t.c.bundle == bundle)
            .order_by(t.c.path)
        )
        with self._read() as conn:
            return [(p, h, c) for p, h, c in conn.execute(query)]

    def history(self, before: int | None = None, limit: int = 20) -> list[Revision]:
        """Committed revisions, newest first, strictly below `before` when given."""
        r = revisions_table
        query = sa.select(r).where(r.c.space == self.space)
        if before is not None:
            query = query.where(r.c.revision < before)
        query = query.order_by(r.c.revision.desc()).limit(limit)
        with self._read() as conn:
            return [
                Revision(
                    row.revision,
                    row.parent,
                    _utc(row.at),
                    row.message,
                    row.changes,
                    row.documents,
                    row.snapshot,
                )
                for row in conn.execute(query)
            ]

    def folder_tags(self) -> dict[str, str]:
        """The stat tag of every bundle subfolder last synced into this space."""
        f = folders_table
        with self._read() as conn:
            rows = conn.execute(sa.select(f.c.bundle, f.c.stat_tag).where(f.c.space == self.space))
            return {b: t for b, t in rows}

    def save_folder_tags(self, tags: dict[str, str]) -> None:
        """Remember the stat tags of the folder just synced."""
        self.writes.save_folder_tags(tags)

    # ---- the one write path ------------------------------------------------------------------

    def close(self) -> None:
        self.engine.dispose()

    def commit(self, changes: Sequence[Change], *, expected: int | None = None, message: str = "") -> Commit:
        """Commit `changes` as one revision, all or nothing (see `storage.documents.writes`)."""
        return self.writes.commit(changes, expected=expected, message=message)


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time this store gives out is UTC-aware."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
