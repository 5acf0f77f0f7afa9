"""The revision store over SQLAlchemy: its engine, the history, and the pool's connections lent to
the plain reads (`storage.documents.reads`) and writes (`storage.documents.writes`) on both engines.

`storage.documents.DocumentStore` uses this for history, for every write, and for every read
except on a SQLite file already at the newest schema (where the reads have a stdlib connection).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.documents.model import Change, Commit, DocumentStoreError, Revision
from storage.documents.reads import PlainReads
from storage.documents.tables import (
    changes_table,
    revisions_table,
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
        self.reads = PlainReads(
            self._lend,
            space,
            sqlite=engine.dialect.name == "sqlite",
            errors=(engine.dialect.loaded_dbapi.Error,),
        )
        """The reads a Directory opens and answers with, on the same lent connections."""

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

    def save_index(self, bundle: str, tag: str, data: bytes) -> None:
        """Keep the derived index of one section, built from the section at `tag`."""
        self.writes.save_index(bundle, tag, data)

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
