"""The revision store's reads in plain SQL on a driver's own connection, one implementation for both engines.

Opening a Directory that nothing changed reads the head, the section tags, the stored indexes
and the folder's stat tags; answering a query reads a few documents. These are the statements for
every Ledger: on a SQLite file already at the newest migration they run on a `sqlite3` connection
of their own, so `flightlog find` and `flightlog mcp` start without importing SQLAlchemy; anywhere
else (PostgreSQL, a file SQLAlchemy created or migrated) on the connection its pool lends
(`storage.documents.sql`), as the writes do (`storage.documents.writes`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from storage.documents.model import DocumentStoreError, chunks
from storage.locations import private_file
from storage.sqlite_setup import LentConnection, open_file

PREFIX = "sqlite:///"


def sqlite_file(url: str) -> Path | None:
    """The database file of a plain `sqlite:///PATH` URL (or a bare path), else None."""
    if "://" not in url:
        return Path(url).expanduser()
    if not url.startswith(PREFIX) or "?" in url:
        return None
    path = url[len(PREFIX) :]
    return Path(path).expanduser() if path and path != ":memory:" else None


class PlainReads:
    """The reads of one space on connections `lend` gives (one read at a time on each), with the
    driver's parameter `marker` (`?` for sqlite3, `%s` for psycopg) and its `errors`."""

    def __init__(
        self,
        lend: Callable[[], AbstractContextManager[Any]],
        space: str,
        *,
        sqlite: bool,
        errors: tuple[type[BaseException], ...],
        close: Callable[[], None] = lambda: None,
    ) -> None:
        self._lend = lend
        self.space = space
        self._sqlite = sqlite
        self._errors = errors
        self._close = close
        self.m = "?" if sqlite else "%s"

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """One read transaction (several statements see one state), errors translated."""
        try:
            with self._lend() as conn:
                if self._sqlite:  # the driver is kept out of transactions: BEGIN is ours
                    conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT" if self._sqlite else "ROLLBACK")
        except self._errors as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e

    def head(self) -> int:
        with self._read() as c:
            row = c.execute(
                f"SELECT revision FROM directory_refs WHERE space = {self.m}", (self.space,)
            ).fetchone()
        return int(row[0]) if row and row[0] else 0

    def sections(self) -> dict[str, str]:
        with self._read() as c:
            rows = c.execute(
                f"SELECT bundle, tag FROM directory_sections WHERE space = {self.m}", (self.space,)
            )
            return {b: t for b, t in rows}

    def index_data(self, bundles: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        out: dict[str, tuple[str, bytes]] = {}
        with self._read() as c:
            for chunk in chunks(sorted(bundles), 200):
                marks = ",".join([self.m] * len(chunk))
                query = "SELECT bundle, tag, data FROM directory_index"
                query += f" WHERE space = {self.m} AND bundle IN ({marks})"
                out.update({b: (t, bytes(d)) for b, t, d in c.execute(query, (self.space, *chunk))})
        return out

    def tree(self, bundle: str | None = None) -> dict[tuple[str, str], str]:
        query = f"SELECT bundle, path, sha256 FROM directory_tree WHERE space = {self.m}"
        params: tuple[str, ...] = (self.space,)
        if bundle is not None:
            query, params = query + f" AND bundle = {self.m}", (self.space, bundle)
        with self._read() as c:
            return {(b, p): h for b, p, h in c.execute(query, params)}

    def hash_of(self, bundle: str, path: str) -> str | None:
        m = self.m
        with self._read() as c:
            row = c.execute(
                f"SELECT sha256 FROM directory_tree WHERE space = {m} AND bundle = {m} AND path = {m}",
                (self.space, bundle, path),
            ).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        wanted = sorted(set(hashes))
        out: dict[str, str] = {}
        if not wanted:
            return out
        with self._read() as c:
            for chunk in chunks(wanted, 500):
                marks = ",".join([self.m] * len(chunk))
                query = f"SELECT sha256, content FROM directory_documents WHERE sha256 IN ({marks})"
                out.update({sha: text for sha, text in c.execute(query, chunk)})
        return out

    def bundle_documents(self, bundle: str) -> list[tuple[str, str, str]]:
        query = (
            "SELECT t.path, t.sha256, d.content FROM directory_tree t"
            " JOIN directory_documents d ON d.sha256 = t.sha256"
            f" WHERE t.space = {self.m} AND t.bundle = {self.m} ORDER BY t.path"
        )
        with self._read() as c:
            return [(p, h, text) for p, h, text in c.execute(query, (self.space, bundle))]

    def folder_tags(self) -> dict[str, str]:
        with self._read() as c:
            rows = c.execute(
                f"SELECT bundle, stat_tag FROM directory_folders WHERE space = {self.m}", (self.space,)
            )
            return {b: t for b, t in rows}

    def close(self) -> None:
        self._close()


def open_sqlite_reads(url: str, space: str) -> PlainReads | None:
    """Stdlib reads of `space` when `url` is a SQLite file already at the newest schema, else None
    (the caller then opens, creates or migrates it with SQLAlchemy)."""
    from storage.migrate import newest_revision

    path = sqlite_file(url)
    if path is None or not path.is_file():
        return None
    private_file(path)  # 0600, as the engine's open leaves it: the Ledger is the operator's
    try:
        conn = open_file(path)
    except sqlite3.Error:
        return None
    try:
        found = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        found = None
    finally:
        conn.close()
    if not found or found[0] != newest_revision():
        return None
    lent = LentConnection(path)
    return PlainReads(lent.lend, space, sqlite=True, errors=(sqlite3.Error,), close=lent.close)
