"""Where flightlog keeps its state by default: FLIGHTLOG_HOME, FLIGHTLOG_LEDGER, FLIGHTLOG_BLOBS.

One definition for every layer (the command line's settings, the proxy's addons, the browser), so the
defaults cannot drift apart. Read from the environment only when called, never at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from storage.configuration import environment


def flightlog_home(env: Mapping[str, str] | None = None) -> Path:
    """FLIGHTLOG_HOME, or ~/.flightlog."""
    env = os.environ if env is None else env
    return Path(environment("home", env) or Path.home() / ".flightlog").expanduser()


def default_ledger_url(env: Mapping[str, str] | None = None) -> str:
    """FLIGHTLOG_LEDGER, or the SQLite file `ledger.db` in FLIGHTLOG_HOME."""
    env = os.environ if env is None else env
    return environment("ledger", env) or f"sqlite:///{flightlog_home(env) / 'ledger.db'}"


def default_blobs_url(env: Mapping[str, str] | None = None) -> str:
    """FLIGHTLOG_BLOBS, or the `blobs` folder in FLIGHTLOG_HOME."""
    env = os.environ if env is None else env
    return environment("blobs", env) or (flightlog_home(env) / "blobs").as_uri()


def secrets_path(home: Path) -> Path:
    """`home/secrets.env`, whether it exists or not (a watcher waits for it to appear)."""
    return home / "secrets.env"


def default_secrets_file(home: Path) -> Path | None:
    """`home/secrets.env` when it exists: the secrets used when no file is named, by the proxy (its
    redaction and its door) and by `flightlog call` alike."""
    path = secrets_path(home)
    return path if path.is_file() else None


def private_home(home: Path) -> Path:
    """Create FLIGHTLOG_HOME readable by its owner only (0700), and tighten one that is wider.

    It holds the root key that mints any token, the Ledger's bearer token and the Ledger itself:
    another local user who can list or read it can act as the operator.
    """
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(home, 0o700)
    return home


def private_file(path: Path) -> None:
    """Create `path` (if absent) with mode 0600, and tighten an existing one we own that is wider.

    Called before SQLite opens a Ledger file: SQLite gives its -wal and -shm files the database
    file's mode, so they end up 0600 too.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _tighten(path, 0o600)
    except OSError:
        return  # SQLite reports a path it cannot use in its own words
    else:
        os.close(fd)


def _tighten(path: Path, mode: int) -> None:
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
            path.chmod(st.st_mode & 0o777 & mode)
    except OSError:
        pass
