"""SQLite: the events table's CHECK constraints compare with `=` and `OR` instead of `IN (...)`.

SQLite builds a small ephemeral table for the right-hand list of `x IN ('a', 'b', 'c')` once per
statement run, and a prepared `executemany` runs its INSERT once per row: the three `IN` lists of
the events checks cost about a quarter of a row's insert, more than any two of its indexes
(bench.ledger's rows, the table alone, against the same checks written out as `OR`s). The
constraints accept and refuse exactly the same rows; only their text changes.

A CHECK constraint does not change how SQLite stores a row, so the stored CREATE TABLE text is
rewritten in place (the procedure of SQLite's ALTER TABLE page, "making other kinds of table schema
changes": `writable_schema`, the new text, `schema_version` + 1), inside the migration's
transaction; reading the table afterwards parses the new text, and a text that did not parse rolls
everything back. No row is copied, whatever the Ledger's size. A SQLite that will not let the schema
table be written (a defensive build) keeps the old text: the same rows are taken, only slower.
PostgreSQL plans `IN` lists as `= ANY(array)` at no such cost: its constraints stay as they are.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import logging
import re
import sqlite3

from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

log = logging.getLogger("flightlog.storage")
IN_LIST = re.compile(r"(\w+) IN \(('[a-z_]+'(?:, '[a-z_]+')*)\)")
"""`column IN ('a', 'b')` of a constant list of plain words: the only form the events checks use."""


def without_in(sql: str) -> str:
    """`sql` with each `column IN ('a', 'b')` written as `(column = 'a' OR column = 'b')`."""

    def ors(match: re.Match[str]) -> str:
        column, values = match.group(1), match.group(2).split(", ")
        return "(" + " OR ".join(f"{column} = {v}" for v in values) + ")"

    return IN_LIST.sub(ors, sql)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    sql = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'"
    ).scalar()
    new = without_in(str(sql))
    if sql is None or new == sql:
        return
    raw = bind.connection.driver_connection
    if hasattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE"):  # a build that is defensive by default
        raw.setconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE, False)  # type: ignore[union-attr]
    version = int(bind.exec_driver_sql("PRAGMA schema_version").scalar() or 0)
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        bind.exec_driver_sql(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'events'", (new,)
        )
        bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    except DBAPIError as e:  # the schema table stays read-only here: the checks keep their IN lists
        log.warning("flightlog: the events checks stay as they were (slower inserts): %s", e.orig)
        return
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")
    bind.exec_driver_sql("SELECT * FROM events LIMIT 0")  # parses the new text (an error rolls back)


def downgrade() -> None:
    raise NotImplementedError("the Ledger is append-only: its schema is never rolled back")
