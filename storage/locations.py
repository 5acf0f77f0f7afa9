"""Where flightlog keeps its state by default: FLIGHTLOG_HOME, FLIGHTLOG_LEDGER, FLIGHTLOG_BLOBS.

One definition for every layer (the command line's settings, the proxy's addons, the browser), so the
defaults cannot drift apart. Read from the environment only when called, never at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def flightlog_home(env: Mapping[str, str] | None = None) -> Path:
    """FLIGHTLOG_HOME, or ~/.flightlog."""
    env = os.environ if env is None else env
    return Path(env.get("FLIGHTLOG_HOME") or Path.home() / ".flightlog").expanduser()


def default_ledger_url(env: Mapping[str, str] | None = None) -> str:
    """FLIGHTLOG_LEDGER, or the SQLite file `ledger.db` in FLIGHTLOG_HOME."""
    env = os.environ if env is None else env
    return env.get("FLIGHTLOG_LEDGER") or f"sqlite:///{flightlog_home(env) / 'ledger.db'}"


def default_blobs_url(env: Mapping[str, str] | None = None) -> str:
    """FLIGHTLOG_BLOBS, or the `blobs` folder in FLIGHTLOG_HOME."""
    env = os.environ if env is None else env
    return env.get("FLIGHTLOG_BLOBS") or (flightlog_home(env) / "blobs").as_uri()
