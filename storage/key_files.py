"""Secret key files in FLIGHTLOG_HOME: made once, 0600, refused when others can read them.

Every key flightlog keeps (the tokens' root key, the collectors' chain keys, the Ledger's signing
keys) is a file of random bytes created with `O_EXCL` (two processes starting at once agree on one
key: the loser reads the winner's), in a folder that only its owner can list. A key that group or
others can read is refused rather than used: whoever reads it can act as the operator.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from storage.errors import StorageError
from storage.locations import private_home


class KeyFileError(StorageError):
    """A key file that cannot be made or read, or that is not fit to be used."""


def secret_key(home: Path, path: Path, size: int, what: str, *, exact: bool = True) -> bytes:
    """The key in `path` (under `home`), made of `size` random bytes (mode 0600, its folder 0700)
    the first time it is asked for. `exact`: the file must hold `size` bytes; else at least that."""
    create_once(home, path, secrets.token_bytes(size), what)
    return read_key(path, size, what, exact=exact)


def secret_token(home: Path, path: Path, what: str) -> str:
    """The bearer token in `path` (under `home`): 32 random bytes as URL-safe text on one line, made
    (mode 0600) the first time it is asked for; a token that exists is read as it is."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise KeyFileError(f"cannot read the {what} {path}: {e.strerror}") from e
    token = secrets.token_urlsafe(32)
    if create_once(home, path, (token + "\n").encode(), what):
        return token
    return path.read_text().strip()  # another process made it first: its token is the one


def create_once(home: Path, path: Path, data: bytes, what: str) -> bool:
    """Write `data` to a new file `path` (mode 0600, `home` and the file's folder 0700), only if there
    is none (`O_EXCL`): True when this call made it, False when it was there already."""
    try:
        private_home(home)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError as e:
        raise KeyFileError(f"cannot create the {what} {path}: {e.strerror}") from e
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return True


def read_key(path: Path, size: int, what: str, *, exact: bool = True) -> bytes:
    """A key file that exists: its bytes, refused when others can read it or its size is wrong."""
    try:
        mode = path.stat().st_mode
        key = path.read_bytes()
    except OSError as e:
        raise KeyFileError(f"cannot read the {what} {path}: {e.strerror}") from e
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"the {what} {path} is readable by others (mode {mode & 0o777:o}); chmod 600 it")
    if len(key) != size if exact else len(key) < size:
        wanted = f"{size} bytes" if exact else f"at least {size} bytes"
        raise KeyFileError(f"the {what} {path} is not {wanted}; remove it to make a new one")
    return key
