"""Where flightlog keeps its state, read from the environment only when a command runs.

Nothing here runs at import time: commands call `load_settings()` and pass the result on, so tests
and embedders can build a `Settings` by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from storage.configuration import environment
from storage.locations import default_blobs_url, default_ledger_url, flightlog_home

if TYPE_CHECKING:
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.ledger import Ledger
    from storage.reader import Reader


@dataclass(frozen=True, slots=True)
class Settings:
    """The four names of DESIGN.md, resolved to concrete values."""

    home: Path
    ledger_url: str
    blobs_url: str
    directory: Path | None

    @property
    def confdir(self) -> Path:
        """mitmproxy's confdir (its CA lives here), always under FLIGHTLOG_HOME."""
        return self.home / "mitmproxy"

    def open_ledger(self, ledger_url: str | None = None, blobs_url: str | None = None) -> Ledger:
        """Open (creating or migrating) the configured Ledger, or the one named by options."""
        # deferred: SQLAlchemy loads slowly; other commands start without it
        from storage.chain.signing import LedgerKeys
        from storage.ledger import open_ledger

        keys = LedgerKeys(self.home)  # this home's keys: what it signs with, what it verifies with
        return open_ledger(ledger_url or self.ledger_url, blobs_url or self.blobs_url, keys=keys)

    def open_reader(self, ledger_url: str | None = None) -> Reader:
        """The configured Ledger (or the one named by options) opened read-only: refused, with
        nothing written, when there is none or its schema needs migrating (`storage.reader`)."""
        from storage.reader import open_reader

        return open_reader(ledger_url or self.ledger_url)

    def open_existing_ledger(self, ledger_url: str | None = None, blobs_url: str | None = None) -> Ledger:
        """`open_ledger` for a command that only reads but needs the whole Ledger (its payloads, its
        chain): the same refusals as `open_reader` first, so it never creates or migrates one."""
        self.open_reader(ledger_url).close()
        return self.open_ledger(ledger_url, blobs_url)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Resolve FLIGHTLOG_HOME, FLIGHTLOG_LEDGER, FLIGHTLOG_BLOBS and FLIGHTLOG_DIRECTORY."""
    env = os.environ if env is None else env
    directory = environment("directory", env)
    return Settings(
        home=flightlog_home(env),
        ledger_url=default_ledger_url(env),
        blobs_url=default_blobs_url(env),
        directory=Path(directory).expanduser() if directory else None,
    )
