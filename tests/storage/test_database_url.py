"""`storage.database`: a Ledger URL's kind and place, read without SQLAlchemy, agree with the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from storage.database import database_of
from storage.engine import normalize_url
from storage.errors import BadLedgerUrl

SQLITE = [
    "ledger.db",
    "~/fl/ledger.db",
    "/abs/ledger.db",
    "sqlite:///rel/ledger.db",
    "sqlite:////abs/ledger.db",
    "sqlite:////abs/ledger.db?timeout=5",
    "sqlite+pysqlite:////abs/ledger.db",
]


@pytest.mark.parametrize("url", SQLITE)
def test_a_sqlite_url_names_the_file_the_engine_opens(url: str) -> None:
    """The read path looks for the very file the engine would open (so "no Ledger at PATH" names it)."""
    found = database_of(url)
    assert found.kind == "sqlite"
    engine_path = Path(str(make_url(normalize_url(url)).database)).expanduser()
    assert found.path == engine_path


@pytest.mark.parametrize(
    "url",
    [
        "postgres://u@h/db",
        "postgresql://u@h:5432/db",
        "postgresql+psycopg://u@h/db?options=-csearch_path%3Ds",
    ],
)
def test_a_postgresql_url_is_a_libpq_conninfo(url: str) -> None:
    """Every spelling the engine takes becomes the `postgresql://` URL psycopg connects with."""
    found = database_of(url)
    assert found.kind == "postgresql" and found.conninfo is not None
    assert found.conninfo.startswith("postgresql://") and found.conninfo.endswith(url.split("://", 1)[1])


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://u@h/db", "use sqlite:///PATH"),
        ("sqlite://", "three slashes"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite:///", "names no file"),
    ],
)
def test_a_url_no_ledger_can_be_read_at_is_refused_in_one_line(url: str, said: str) -> None:
    with pytest.raises(BadLedgerUrl, match=said):
        database_of(url)


def test_a_password_is_not_repeated_in_messages() -> None:
    assert database_of("postgresql://fl:s3cret@db:5432/x").where == "postgresql://fl:***@db:5432/x"
