"""Scoped tokens: link-sized credentials that carry their own limits, in the macaroon style.

A token is an identifier, a list of caveats (see `authority.caveats`) and a signature chained over them:

```
sig_0 = HMAC-SHA256(root_key, identifier)
sig_i = HMAC-SHA256(sig_{i-1}, caveat_i)        token signature = sig_n
```

so that:
- **verifying needs no database**: recompute the chain from the root key and compare (constant time);
- **attenuating needs no root key**: a holder appends a caveat and re-keys with the signature it holds,
  and since caveats are conjunctive the result can only allow less than its parent;
- **tampering is refused**: changing, dropping or reordering any caveat breaks the chain.

Wire form (`encode`/`decode`): `flt_` + base64url without padding of
`identifier "\\n" caveat_1 "\\n" ... caveat_n "\\n" signature(32 bytes)`; caveats are kept in their
compact form (`uses<=3`). A token with three limits is about 130 characters: it fits in a link.

The identifier (16 base64url characters, 96 random bits) is shared by a token and everything
attenuated from it: it names the authority lent, and its uses (`uses <= N`) are spent under that
identifier in the Ledger's database (`storage.token_uses`, judged by `authority.gate`).

The root key is 32 random bytes in `FLIGHTLOG_HOME/token.key`, created on first use with mode 0600.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from authority.caveats import Caveat, CaveatError, Limits, fold, fold_onto, narrows, parse
from authority.errors import AuthorityError
from storage.key_files import KeyFileError, secret_key

PREFIX: Final = "flt_"
SIG_BYTES: Final = 32
ROOT_KEY_FILE: Final = "token.key"


class TokenError(AuthorityError):
    """A token that is malformed, tampered with or otherwise not acceptable."""


class TokenRefused(TokenError):
    """A token that does not verify (limit `signature`) or carries a caveat no verifier understands."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Token:
    """A token as carried: identifier, caveats (compact text, in order) and the chained signature."""

    identifier: str
    caveats: tuple[str, ...]
    signature: bytes

    def encode(self) -> str:
        """The link-sized text form."""
        raw = "\n".join((self.identifier, *self.caveats, "")).encode() + self.signature
        return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def parsed(self) -> tuple[Caveat, ...]:
        """The caveats, parsed; an unknown or malformed one raises `TokenRefused`."""
        try:
            return tuple(parse(c) for c in self.caveats)
        except CaveatError as e:
            raise TokenRefused("caveat", f"token refused: {e}") from e

    def limits(self) -> Limits:
        """What this token allows, all caveats folded (unverified: call `verify` for trust)."""
        return fold(self.parsed())


def decode(text: str) -> Token:
    """Read a token's text form; anything that is not one raises `TokenError` (never a traceback)."""
    text = text.strip()
    if text.lower().startswith("bearer "):
        text = text[7:].strip()
    if not text.startswith(PREFIX):
        raise TokenError(f"not a flightlog token (it should start with {PREFIX!r})")
    body = text[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError) as e:
        raise TokenError("not a flightlog token (its text is not base64url)") from e
    head, sig = raw[:-SIG_BYTES], raw[-SIG_BYTES:]
    if len(sig) != SIG_BYTES or not head.endswith(b"\n"):
        raise TokenError("not a flightlog token (it is truncated)")
    try:
        lines = head[:-1].decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise TokenError("not a flightlog token (its caveats are not UTF-8)") from e
    if not lines[0]:
        raise TokenError("not a flightlog token (it has no identifier)")
    return Token(lines[0], tuple(lines[1:]), sig)


def _chain(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()


def signature(root_key: bytes, identifier: str, caveats: Sequence[str]) -> bytes:
    """The chained signature of `identifier` and `caveats` under `root_key`."""
    sig = _chain(root_key, identifier)
    for caveat in caveats:
        sig = _chain(sig, caveat)
    return sig


def mint(root_key: bytes, caveats: Iterable[str], identifier: str | None = None) -> Token:
    """A new token from the root key, limited by `caveats` (readable or compact; validated here)."""
    ident = identifier or base64.urlsafe_b64encode(secrets.token_bytes(12)).decode()
    if not ident or "\n" in ident:
        raise TokenError("a token identifier is one non-empty line")
    compact = _compact(caveats)
    return Token(ident, compact, signature(root_key, ident, compact))


def attenuate(token: Token, caveats: Iterable[str], *, strict: bool = True) -> Token:
    """`token` narrowed by more caveats, without the root key.

    Appending can never widen a token (every caveat must hold). With `strict`, a caveat that would
    change nothing (e.g. `uses <= 10` on a token already limited to 3) is refused, so a holder who
    meant to widen learns at once that attenuation cannot do that.
    """
    added = _compact(caveats)
    if not added:
        raise TokenError("attenuate needs at least one caveat")
    limits = token.limits()
    sig = token.signature
    for caveat in added:
        parsed = parse(caveat)
        if strict and not narrows(limits, parsed):
            raise TokenError(f"caveat {str(parsed)!r} would not narrow the token (a token can only narrow)")
        limits = fold_onto(limits, parsed)
        sig = _chain(sig, caveat)
    return Token(token.identifier, token.caveats + added, sig)


def verify(token: Token, root_key: bytes) -> Limits:
    """Check the signature chain and every caveat's syntax; give the limits the token carries.

    Needs no database. A bad signature raises `TokenRefused` with limit `signature`; an unknown
    caveat raises it with limit `caveat` (an unknown caveat is refused, never ignored).
    """
    expected = signature(root_key, token.identifier, token.caveats)
    if not hmac.compare_digest(expected, token.signature):
        raise TokenRefused("signature", "token refused: its signature does not verify (tampered or foreign)")
    return token.limits()


def _compact(caveats: Iterable[str]) -> tuple[str, ...]:
    try:
        return tuple(parse(c).compact for c in caveats)
    except CaveatError as e:
        raise TokenError(str(e)) from e


def root_key(home: Path) -> bytes:
    """The root key in `home/token.key`, created (32 random bytes, mode 0600) on first use.

    A key file readable by group or others is refused: whoever reads it can mint any token.
    """
    try:
        return secret_key(home, home / ROOT_KEY_FILE, 32, "root key", exact=False)
    except KeyFileError as e:
        raise TokenError(str(e)) from e
