"""The Ledger opened to read: one DB-API connection, read-only, that never creates or migrates.

Every read command opens the Ledger here (`open_reader`): a SQLite file with the standard library's
`sqlite3` in `mode=ro` (no SQLAlchemy import), a PostgreSQL Ledger with psycopg. A Ledger that is
not there is one line naming where it was looked for and how one is made, with nothing written; a
Ledger of an older schema says it needs migrating rather than being migrated by a read. The query
modules run their SQL text (`storage.event_sql`) on a `Reader`, or on a connection lent by a
running proxy's engine (`reading`), so each question has one implementation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from storage.database import Database, database_of
from storage.errors import LedgerUnavailable, StorageError, from_library
from storage.escaped import escape, needs_escape
from storage.event_sql import Dialect
from storage.filters import QueryError

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

CREATE_HINT: Final = (
    "`flightlog proxy` creates it as it starts, `flightlog ledger migrate` creates it empty"
    " (or point FLIGHTLOG_LEDGER / --ledger at an existing one)"
)
MIGRATE_HINT: Final = "`flightlog ledger migrate` (or starting `flightlog proxy`) migrates it"
BUSY_SECONDS: Final = 30.0


class LedgerMissing(StorageError):
    """No Ledger where one was named: a read never makes one."""


class LedgerOutdated(StorageError):
    """A Ledger whose schema is older than this flightlog's: a read never migrates it."""


class Reader:
    """One open DB-API connection to a Ledger and its dialect; rows come back as dicts."""

    def __init__(self, dialect: Dialect, conn: Any, where: str, errors: tuple[type[Exception], ...]) -> None:
        self.dialect: Dialect = dialect
        self.conn = conn
        self.where = where
        self._errors = errors

    def rows(
        self, sql: str, params: Sequence[Any] = (), doing: str = "read the ledger"
    ) -> list[dict[str, Any]]:
        """The rows of one statement (placeholders `?`); a database error is a `QueryError` naming
        what was being done. A text parameter neither database can hold (a NUL, a lone surrogate: a
        non-UTF-8 byte typed in a question) is compared in the escaped form the writer stores such
        text in (`storage.escaped`), so it finds what was recorded with it instead of failing."""
        if self.dialect == "postgresql":
            sql = sql.replace("?", "%s")
        args = tuple(escape(p) if isinstance(p, str) and needs_escape(p) else p for p in params)
        try:
            cur = self.conn.cursor()
            try:
                cur.execute(sql, args)
                names = [d[0] for d in cur.description or ()]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            finally:
                cur.close()
        except self._errors as e:
            outage = from_library(e, self.where)
            if isinstance(outage, LedgerUnavailable):  # the database went away: not the question's fault
                raise outage from e
            raise QueryError(f"cannot {doing}: {e}".splitlines()[0]) from e

    def close(self) -> None:
        self.conn.close()


@contextmanager
def reading(source: Engine | Reader) -> Iterator[Reader]:
    """A `Reader` over `source`: itself, or a connection lent by an engine's pool for the block."""
    if isinstance(source, Reader):
        yield source
        return
    try:
        conn = source.raw_connection()
    except Exception as e:
        raise (from_library(e, str(source.url)) or e) from e
    try:
        errors = (source.dialect.loaded_dbapi.Error,)
        yield Reader(
            "postgresql" if source.dialect.name == "postgresql" else "sqlite", conn, str(source.url), errors
        )
    finally:
        conn.close()


def open_reader(url: str) -> Reader:
    """The Ledger at `url` opened read-only; `LedgerMissing` when there is none (nothing is created),
    `LedgerOutdated` when its schema needs migrating first."""
    database = database_of(url)
    reader = _open_sqlite(database) if database.kind == "sqlite" else _open_pg(database)
    try:
        _check_schema(reader, database)
    except BaseException:
        reader.close()
        raise
    return reader


def _open_sqlite(database: Database) -> Reader:
    assert database.path is not None
    path = database.path.resolve()
    if not path.is_file():
        raise LedgerMissing(f"no Ledger at {path}: {CREATE_HINT}")
    try:
        conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, timeout=BUSY_SECONDS, isolation_level=None
        )
    except sqlite3.Error as e:
        raise _translated(e, database) from e
    return Reader("sqlite", conn, str(path), (sqlite3.Error,))


def _open_pg(database: Database) -> Reader:
    import psycopg

    try:
        conn = psycopg.connect(database.conninfo or "", autocommit=True)
    except psycopg.Error as e:
        raise _translated(e, database) from e
    return Reader("postgresql", conn, database.where, (psycopg.Error,))


def _translated(e: Exception, database: Database) -> StorageError:
    return from_library(e, database.where) or StorageError(
        f"cannot open the ledger at {database.where}: {e}".splitlines()[0]
    )


def _check_schema(reader: Reader, database: Database) -> None:
    """Refuse a database that holds no Ledger, or one whose schema is older than this flightlog's."""
    from storage.migrate import newest_revision

    try:
        found = reader.rows("SELECT version_num FROM alembic_version", doing="read the schema version")
    except (QueryError, LedgerUnavailable) as e:  # no such table (PostgreSQL's is said as a lost one)
        raise LedgerMissing(
            f"no Ledger at {database.where} (no flightlog schema there): {CREATE_HINT}"
        ) from e
    version = str(found[0]["version_num"]) if found else None
    newest = newest_revision()
    if version is None:
        raise LedgerMissing(f"no Ledger at {database.where} (an empty schema): {CREATE_HINT}")
    if version < newest:
        raise LedgerOutdated(
            f"the Ledger at {database.where} has schema {version}, this flightlog reads {newest}:"
            f" {MIGRATE_HINT}"
        )
