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
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

from storage.errors import StorageError
from storage.key_files import read_key, secret_key

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
        key = secret_key(self.home, self.path(collector), KEY_BYTES, "chain key")
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
        return {unquote(p.name[: -len(SUFFIX)]): read_key(p, KEY_BYTES, "chain key") for p in names}


type Keys = ChainKeys | None
"""A Ledger's chain keys, or none (unkeyed chains)."""
