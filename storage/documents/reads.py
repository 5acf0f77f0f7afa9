"""The revision store's reads on a SQLite Ledger with the standard library alone (no SQLAlchemy).

Opening a Directory that nothing changed reads the head, the section tags, the stored indexes
and the folder's stat tags; answering a query reads a few documents. On the embedded SQLite
Ledger those reads go through `sqlite3` here, so `flightlog find` and `flightlog mcp` start
without importing SQLAlchemy (which costs more than the rest of the command). Used only on a file
that exists and whose schema is already at the newest migration; anything else (a new file, a
migration to run, PostgreSQL) takes the SQLAlchemy path of `storage.documents.sql`, and so does
every write. Same queries, same answers: `tests/catalog/test_index.py` runs both.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from storage.documents.model import DocumentStoreError, chunks
from storage.locations import private_file
from storage.sqlite_setup import open_file

PREFIX = "sqlite:///"


def sqlite_file(url: str) -> Path | None:
    """The database file of a plain `sqlite:///PATH` URL (or a bare path), else None."""
    if "://" not in url:
        return Path(url).expanduser()
    if not url.startswith(PREFIX) or "?" in url:
        return None
    path = url[len(PREFIX) :]
    return Path(path).expanduser() if path and path != ":memory:" else None


class SqliteReads:
    """The reads of one space over one stdlib connection (shared by threads, one read at a time)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, space: str) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.Lock()
        self.space = space

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (several statements see one state), errors translated. A closed
        store reopens on its next read, as an engine does after `dispose()`."""
        with self._lock:
            try:
                conn = self._conn = self._conn or open_file(self._path)
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e

    def head(self) -> int:
        with self._read() as c:
            row = c.execute("SELECT revision FROM directory_refs WHERE space = ?", (self.space,)).fetchone()
        return int(row[0]) if row and row[0] else 0

    def sections(self) -> dict[str, str]:
        with self._read() as c:
            rows = c.execute("SELECT bundle, tag FROM directory_sections WHERE space = ?", (self.space,))
            return {b: t for b, t in rows}

    def index_data(self, bundles: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        out: dict[str, tuple[str, bytes]] = {}
        with self._read() as c:
            for chunk in chunks(sorted(bundles), 200):
                marks = ",".join("?" * len(chunk))
                query = (
                    f"SELECT bundle, tag, data FROM directory_index WHERE space = ? AND bundle IN ({marks})"
                )
                out.update({b: (t, bytes(d)) for b, t, d in c.execute(query, (self.space, *chunk))})
        return out

    def tree(self, bundle: str | None = None) -> dict[tuple[str, str], str]:
        query = "SELECT bundle, path, sha256 FROM directory_tree WHERE space = ?"
        params: tuple[str, ...] = (self.space,)
        if bundle is not None:
            query, params = query + " AND bundle = ?", (self.space, bundle)
        with self._read() as c:
            return {(b, p): h for b, p, h in c.execute(query, params)}

    def hash_of(self, bundle: str, path: str) -> str | None:
        with self._read() as c:
            row = c.execute(
                "SELECT sha256 FROM directory_tree WHERE space = ? AND bundle = ? AND path = ?",
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
                marks = ",".join("?" * len(chunk))
                query = f"SELECT sha256, content FROM directory_documents WHERE sha256 IN ({marks})"
                out.update({sha: text for sha, text in c.execute(query, chunk)})
        return out

    def bundle_documents(self, bundle: str) -> list[tuple[str, str, str]]:
        query = (
            "SELECT t.path, t.sha256, d.content FROM directory_tree t"
            " JOIN directory_documents d ON d.sha256 = t.sha256"
            " WHERE t.space = ? AND t.bundle = ? ORDER BY t.path"
        )
        with self._read() as c:
            return [(p, h, text) for p, h, text in c.execute(query, (self.space, bundle))]

    def folder_tags(self) -> dict[str, str]:
        with self._read() as c:
            rows = c.execute("SELECT bundle, stat_tag FROM directory_folders WHERE space = ?", (self.space,))
            return {b: t for b, t in rows}

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def open_sqlite_reads(url: str, space: str) -> SqliteReads | None:
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
    if not found or found[0] != newest_revision():
        conn.close()
        return None
    return SqliteReads(path, conn, space)
