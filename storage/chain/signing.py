"""Ed25519 keys of the Ledger: the operator's root and one per collector, kept in FLIGHTLOG_HOME.

A MAC proves nothing to whoever must hold its key to check it: a reviewer given the keys to verify
a Ledger can forge one. So each collector signs its batches' chain heads with an Ed25519 key of its
own (`chain-keys/COLLECTOR.ed25519`, its 32-byte seed, 0600), and the operator's root key
(`ledger-root.ed25519`) signs each collector's public key into the Ledger when the collector first
writes (`storage.chain.registry`). A verifier needs public keys only: the root's, which it is told to
trust (`ledger verify --root-key`, this home's own, or a witness's checkpoint), and the collectors',
which the Ledger holds under the root's signature.

Every signed text starts with its own purpose (`head`, `register`, `checkpoint`, `prune`), so a
signature made for one can never be replayed as another.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from storage.chain.keys import FOLDER, ChainKeys
from storage.key_files import KeyFileError, read_key, secret_key

VERSION: Final = "flightlog-chain/3"
"""The signed chain's version: in every signed batch's header and every signed text."""
ROOT_FILE: Final = "ledger-root.ed25519"
SUFFIX: Final = ".ed25519"
SEED_BYTES: Final = 32


def canonical(value: Any) -> bytes:
    """The one byte form of a signed value: compact, ASCII, keys sorted."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, sort_keys=True).encode("ascii")


def signed_text(purpose: str, value: Any) -> bytes:
    """What is signed for `purpose`: the version, the purpose and the value, canonical."""
    return canonical([VERSION, purpose, value])


def head_text(digest: str) -> bytes:
    """What a collector signs for one batch: its chain digest (which binds the collector, the
    index, the batch's facts and every event row, chained to all before)."""
    return signed_text("head", digest)


def public_hex(key: Ed25519PrivateKey) -> str:
    return key.public_key().public_bytes_raw().hex()


def sign(key: Ed25519PrivateKey, text: bytes) -> str:
    """The signature of `text` under `key`, as hex."""
    return key.sign(text).hex()


def verifies(public: str | None, signature: str | None, text: bytes) -> bool:
    """Whether `signature` (hex) is `public`'s (hex) over `text`; False for anything malformed."""
    if not public or not signature:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public)).verify(bytes.fromhex(signature), text)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def short(public: str) -> str:
    """A public key as people compare it: `ed25519:` and its first 16 hex digits."""
    return f"ed25519:{public[:16]}"


@dataclass
class Signer:
    """One collector's signing key, and the root that registers it (loaded only when it must)."""

    collector: str
    key: Ed25519PrivateKey
    root: Callable[[], Ed25519PrivateKey]
    public: str = field(init=False)

    def __post_init__(self) -> None:
        self.public = public_hex(self.key)

    def sign_head(self, digest: str) -> str:
        return sign(self.key, head_text(digest))


class LedgerKeys:
    """The signing keys of one FLIGHTLOG_HOME, and its older MAC chain keys (read to verify the
    chains written before signatures: `storage.chain.keys`)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.folder = home / FOLDER
        self.mac = ChainKeys(home)
        self._signers: dict[str, Signer] = {}
        self._root: Ed25519PrivateKey | None = None

    @property
    def root_path(self) -> Path:
        return self.home / ROOT_FILE

    def root(self) -> Ed25519PrivateKey:
        """The operator's root key, made the first time it is asked for."""
        if self._root is None:
            seed = secret_key(self.home, self.root_path, SEED_BYTES, "Ledger root key")
            self._root = Ed25519PrivateKey.from_private_bytes(seed)
        return self._root

    def root_public(self) -> str | None:
        """The root's public key when this home holds the root (never made here: a verify)."""
        if not self.root_path.exists():
            return None
        try:
            return public_hex(Ed25519PrivateKey.from_private_bytes(read_key(self.root_path, 32, "root key")))
        except KeyFileError:
            return None

    def signer(self, collector: str) -> Signer:
        """The collector's signer, its key made (0600) the first time it is asked for."""
        if (known := self._signers.get(collector)) is None:
            path = self.folder / (quote(collector, safe="") + SUFFIX)
            seed = secret_key(self.home, path, SEED_BYTES, "signing key")
            known = Signer(collector, Ed25519PrivateKey.from_private_bytes(seed), self.root)
            self._signers[collector] = known
        return known

    def held(self) -> dict[str, bytes]:
        """The MAC chain keys this home holds (to verify chains written before signatures)."""
        return self.mac.held()


type Keys = ChainKeys | LedgerKeys | None
"""How a Ledger's writer chains its batches: signed (`LedgerKeys`, what `open_ledger` uses),
MACed as flightlog did before signatures (`ChainKeys`), or plain digests (None)."""
