"""The Directory store's writes (`storage.documents.writes`) when the database goes away under them:
one clear error, nothing half-written, and the next write works."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.documents import open_document_store
from storage.documents.model import Change, DocumentStoreError
from tests.support.postgres import end_backend


def test_a_postgres_write_whose_connection_the_server_ended_fails_once_then_commits(pg_url: str) -> None:
    """The pool's connection was ended by the server (a restart) between two writes: the next
    commit fails as one `DocumentStoreError` line, changes nothing, and the commit after it, on a
    fresh connection, lands as the next revision."""
    store = open_document_store(pg_url, "space")
    try:
        assert store.commit([Change("b", "one.md", "one")]).revision == 1
        raw = store.engine.raw_connection()
        try:
            pid = raw.driver_connection.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[union-attr]
        finally:
            raw.close()
        end_backend(pg_url, pid)
        with pytest.raises(DocumentStoreError) as failed:
            store.commit([Change("b", "two.md", "two")])
        assert "\n" not in str(failed.value) and "directory commit failed" in str(failed.value)
        assert store.head() == 1 and store.hash_of("b", "two.md") is None
        assert store.commit([Change("b", "two.md", "two")]).revision == 2
        assert sorted(p for _, p in store.tree()) == ["one.md", "two.md"]
    finally:
        store.close()


def test_a_sqlite_write_whose_database_file_is_gone_says_so_in_one_line(tmp_path: Path) -> None:
    """The stdlib path: the Ledger file was removed while the store was open. A write does not make
    an empty database in its place: it fails as one `DocumentStoreError` line."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_document_store(url, "space").close()  # created and migrated
    store = open_document_store(url, "space")  # the stdlib reads and writes
    try:
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"ledger.db{suffix}").unlink(missing_ok=True)
        with pytest.raises(DocumentStoreError) as failed:
            store.commit([Change("b", "one.md", "one")])
        assert "\n" not in str(failed.value)
        assert not (tmp_path / "ledger.db").exists(), "the write made an empty database in its place"
    finally:
        store.close()
