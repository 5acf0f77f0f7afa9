"""Scoped tokens' uses, spent atomically in the Ledger's database (the `token_uses` table).

A use is one row `(token, use)`: spending reads the token's highest use number and inserts the next
one while it stays within the limit, in one write transaction. On SQLite the write lock is taken
first (`BEGIN IMMEDIATE`), so the read and the insert see no other writer; on PostgreSQL two writers
may read the same number, and the key lets one insert it (the other's `ON CONFLICT DO NOTHING`
inserts nothing and it reads again). So N workers and N proxies on one Ledger together spend exactly
a token's `uses`, and each row is the record of that use (when, which verb, through which door).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from storage.engine import WRITE
from storage.errors import StorageError, from_library
from storage.sqlite_setup import sqlite_time

ATTEMPTS: Final = 64
"""A writer that lost the race reads again; more than a handful of losses in a row is a fault."""
_HIGHEST = text("SELECT COALESCE(MAX(use), 0) FROM token_uses WHERE token = :token")
_COUNT = text("SELECT count(*) FROM token_uses WHERE token = :token")
_SPEND = text(
    "INSERT INTO token_uses (token, use, at, verb, door) VALUES (:token, :use, :at, :verb, :door)"
    " ON CONFLICT DO NOTHING"
)


class TokenUses:
    """The use book of one Ledger (`authority.gate.UseBook`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def used(self, identifier: str) -> int:
        """How many uses of the token (and everything attenuated from it) are recorded."""
        try:
            with self.engine.connect() as conn:
                return int(conn.execute(_COUNT, {"token": identifier}).scalar_one())
        except DBAPIError as e:
            raise _translated(e, self.engine) from e

    def spend(self, identifier: str, limit: int, verb: str, door: str, at: datetime) -> int | None:
        """Record the next use when fewer than `limit` are recorded: its number, else None."""
        when: datetime | str = sqlite_time(at) if self.engine.dialect.name == "sqlite" else at
        for _ in range(ATTEMPTS):
            try:
                with self.engine.connect().execution_options(**WRITE) as conn, conn.begin():
                    highest = int(conn.execute(_HIGHEST, {"token": identifier}).scalar_one())
                    if highest >= limit:
                        return None
                    values = {"token": identifier, "use": highest + 1, "at": when, "verb": verb, "door": door}
                    if conn.execute(_SPEND, values).rowcount == 1:
                        return highest + 1
            except DBAPIError as e:
                raise _translated(e, self.engine) from e
        raise StorageError(f"could not spend a use of token {identifier} after {ATTEMPTS} attempts")


def _translated(error: DBAPIError, engine: Engine) -> StorageError:
    return from_library(error, engine.url.render_as_string(hide_password=True)) or StorageError(
        f"the Ledger could not count a token's uses: {str(error).splitlines()[0]}"
    )
