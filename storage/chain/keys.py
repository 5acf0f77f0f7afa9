"""The keys of the batch chain: one per collector, kept outside the database.

A chain whose digests anyone can recompute proves nothing to whoever holds the database: rewrite a
row, recompute every digest after it, and the chain checks out again. So each collector's digests
are HMACs under a key of its own, 32 random bytes in `FLIGHTLOG_HOME/chain-keys/COLLECTOR.key`
(mode 0600, the folder 0700), made when the collector first writes. The database keeps only the
key's id (an HMAC of a fixed text under the key: it names the key without revealing it), in the
collector's registration row (`storage.chain.links`), so a verifier can tell which key a chain needs and
refuse a chain it holds no key for.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

from storage.errors import StorageError
from storage.locations import private_home

FOLDER: Final = "chain-keys"
SUFFIX: Final = ".key"
KEY_BYTES: Final = 32


def key_id(key: bytes) -> str:
    """The public name of a key (16 hex digits of an HMAC of a fixed text)."""
    return hmac.new(key, b"flightlog-chain-key-id", hashlib.sha256).hexdigest()[:16]


class ChainKeys:
    """The collectors' keys in one FLIGHTLOG_HOME."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.folder = home / FOLDER
        self._known: dict[str, bytes] = {}

    def path(self, collector: str) -> Path:
        return self.folder / (quote(collector, safe="") + SUFFIX)

    def key_for(self, collector: str) -> bytes:
        """The collector's key, made (32 random bytes, 0600) the first time it is asked for."""
        if (known := self._known.get(collector)) is not None:
            return known
        path = self.path(collector)
        try:
            private_home(self.home)
            self.folder.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        except OSError as e:
            raise StorageError(f"cannot create the chain key {path}: {e.strerror}") from e
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
        key = self._read(path)
        self._known[collector] = key
        return key

    def held(self) -> dict[str, bytes]:
        """Every key this home holds, by collector (none when it holds none)."""
        try:
            names = sorted(p for p in self.folder.iterdir() if p.name.endswith(SUFFIX))
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StorageError(f"cannot list the chain keys in {self.folder}: {e.strerror}") from e
        return {unquote(p.name[: -len(SUFFIX)]): self._read(p) for p in names}

    @staticmethod
    def _read(path: Path) -> bytes:
        try:
            mode = path.stat().st_mode
            key = path.read_bytes()
        except OSError as e:
            raise StorageError(f"cannot read the chain key {path}: {e.strerror}") from e
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise StorageError(
                f"the chain key {path} is readable by others (mode {mode & 0o777:o}); chmod 600 it"
            )
        if len(key) != KEY_BYTES:
            raise StorageError(f"the chain key {path} is not {KEY_BYTES} bytes")
        return key


type Keys = ChainKeys | None
"""A Ledger's chain keys, or none (unkeyed chains)."""
