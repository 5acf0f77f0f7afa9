"""Where a Ledger's database is and which kind it is, read from its URL without a database library.

A read command must know whether a Ledger exists before anything opens it (opening a SQLite file
with SQLAlchemy or `sqlite3`'s default mode creates it), and which driver reads it, without paying
for SQLAlchemy's import. The URL forms are `storage.engine.normalize_url`'s: `sqlite:///PATH`, a
plain path, `postgres://`, `postgresql://` and `postgresql+psycopg://`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from storage.errors import BadLedgerUrl

Kind = Literal["sqlite", "postgresql"]
PG_PREFIXES = ("postgresql+psycopg://", "postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class Database:
    """A Ledger's database: a SQLite file (`path`) or a PostgreSQL server (`conninfo`, libpq's URL)."""

    kind: Kind
    url: str
    """The URL as it was given: what messages name."""
    path: Path | None = None
    conninfo: str | None = None

    @property
    def where(self) -> str:
        """What a person reads as its location: the file, or the URL (without a password)."""
        if self.path is not None:
            return str(self.path)
        return _without_password(self.url)


def database_of(url: str) -> Database:
    """The database a Ledger URL names; `BadLedgerUrl` for one flightlog cannot read."""
    for prefix in PG_PREFIXES:
        if url.startswith(prefix):
            return Database("postgresql", url, conninfo="postgresql://" + url[len(prefix) :])
    if "://" not in url:
        return Database("sqlite", url, path=Path(url).expanduser())
    scheme, _, rest = url.partition("://")
    if scheme not in ("sqlite", "sqlite+pysqlite"):
        raise BadLedgerUrl(f"ledger URL {url!r}: use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")
    if not rest.startswith("/"):
        raise BadLedgerUrl(f"ledger URL {url!r}: a SQLite URL is sqlite:///PATH (three slashes)")
    database = rest[1:].split("?", 1)[0]
    if not database or database == ":memory:":
        raise BadLedgerUrl(f"ledger URL {url!r} names no file: an in-memory Ledger cannot be read later")
    return Database("sqlite", url, path=Path(database).expanduser())


def _without_password(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{host}"
