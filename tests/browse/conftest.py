"""Ledgers the replay, serve-replay and export tests record into."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.ledger import Ledger, open_ledger


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """A Ledger on each engine (SQLite and PostgreSQL), blobs in the test's folder."""
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """For command-line tests: the command layer is the same on both engines, which the rest cover."""
    opened = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()
