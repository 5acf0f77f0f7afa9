"""Scratch PostgreSQL databases for the benchmarks, made on the server `FLIGHTLOG_TEST_PG` names
(the tests' server) and dropped afterwards.

One place for what every PostgreSQL benchmark needs: a database of its own so runs never share
rows, admin statements that wait out a restart of the shared server (the fault tests restart it),
and a drop that says so in one line when it cannot clean up instead of hiding the leftover.
"""

from __future__ import annotations

import os
import time
import uuid
from argparse import ArgumentParser
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

ADMIN: Final = os.environ.get("FLIGHTLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
"""The admin URL (a database to connect to for CREATE/DROP DATABASE); `--pg` overrides it."""
ATTEMPTS: Final = 30
"""Connection attempts before an admin statement gives up (~40 s: a restart takes a few)."""


def add_pg_option(parser: ArgumentParser) -> None:
    """`--pg`, the admin URL, as every PostgreSQL benchmark takes it."""
    parser.add_argument("--pg", default=ADMIN, help="PostgreSQL admin URL (a scratch database is made)")


def admin_execute(sql: str, admin: str = ADMIN) -> None:
    """Run one admin statement, waiting out a restart of the shared server; its error if it never
    came back."""
    import psycopg  # only a PostgreSQL run needs the driver

    for attempt in range(ATTEMPTS):
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
                conn.execute(sql.encode())
            return
        except psycopg.OperationalError:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(min(2.0, 0.2 * (attempt + 1)))


def create_database(admin: str = ADMIN, prefix: str = "flbench") -> str:
    """A new, empty database on `admin`'s server; its SQLAlchemy URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin_execute(f'CREATE DATABASE "{name}"', admin)
    server = admin.rsplit("/", 1)[0].replace("postgresql://", "")
    return f"postgresql+psycopg://{server}/{name}"


def drop_database(url: str, admin: str = ADMIN) -> None:
    """Drop the database `create_database` gave (its connections ended); one line if it cannot."""
    name = url.rsplit("/", 1)[1]
    try:
        admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', admin)
    except Exception as e:  # the figures are printed already: a leftover is said, not raised
        print(f"could not drop the scratch database {name} ({str(e).splitlines()[0]}); drop it by hand")


@contextmanager
def scratch_database(admin: str = ADMIN, prefix: str = "flbench") -> Iterator[str]:
    """`create_database`'s URL for the block, dropped after it."""
    url = create_database(admin, prefix)
    try:
        yield url
    finally:
        drop_database(url, admin)
