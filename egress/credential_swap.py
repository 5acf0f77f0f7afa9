"""The swap at the boundary: a lent placeholder becomes the real secret, for that secret's hosts only.

A run's command holds placeholders (`egress.loan_book`); the proxy, after the egress policy allowed a
request, puts the real value in where clients put keys, and only when the request's real destination
is one of the secret's hosts (`NAME.hosts=` in the secrets file, the providers' defaults,
`catalog.secret_hosts`):

- `Authorization: Bearer P` (and `token P`, as GitHub's clients write it);
- `Authorization: Basic base64(user:pass)`, P as the user or the password (git's HTTP basic auth,
  a netrc read by requests or curl);
- `x-api-key: P` (Anthropic), `api-key: P` (Azure OpenAI), `x-goog-api-key: P`;
- a query parameter whose whole value is P (`?key=P`).

A placeholder anywhere else (another host, a body, the URL's path, a header of another name, a piece
of one split across requests, base64-encoded) is misplaced: the request is refused whole, so the
real value never rides on a request that also carries something the proxy could not account for.
Pieces are found by the placeholder's aligned 8-character chunks: any piece of `PIECE` characters or
more of its random part holds one whole. Shorter pieces are not told apart from chance, and carry
nothing: a placeholder authenticates nothing, whoever gets it.

Pure functions over header fields, a path and a body: the proxy's shell is
`addons.credential_swap`.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from catalog.secret_hosts import Place, allows
from egress.loan_book import prefix_of
from recording.redaction.encoded_forms import base64_forms

CHUNK: Final = 8
PIECE: Final = 2 * CHUNK - 1
"""The shortest piece of a placeholder always found: it holds one of its aligned chunks whole."""
KEY_HEADERS: Final = frozenset({b"x-api-key", b"api-key", b"x-goog-api-key"})
BEARERS: Final = ("bearer", "token")
Fields = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class Lent:
    """What the proxy knows of the loans in force: placeholder -> secret name, the secrets' values,
    and each name's host patterns."""

    loans: Mapping[str, str]
    values: Mapping[str, str]
    hosts: Callable[[str], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Swapped:
    """The request as it goes upstream: its header fields and path, and the names swapped in."""

    fields: tuple[tuple[bytes, bytes], ...]
    path: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Misplaced:
    """A placeholder the request may not carry: the secret's name, and where it was found."""

    name: str
    where: str

    @property
    def limit(self) -> str:
        return f"the placeholder lent for {self.name} {self.where}"


Outcome = Swapped | Misplaced | None
"""None: the request carries no placeholder (it goes as it is)."""


@functools.lru_cache(maxsize=256)
def needles(placeholder: str) -> tuple[bytes, ...]:
    """What finds `placeholder` or a piece of it: its random part's aligned chunks (and its last
    `CHUNK` characters), and the whole placeholder in base64 at each alignment."""
    random = placeholder[len(prefix_of(placeholder)) :]
    chunks = {random[i : i + CHUNK] for i in range(0, len(random) - CHUNK + 1, CHUNK)}
    chunks.add(random[-CHUNK:])
    return tuple(sorted({c.encode() for c in chunks} | base64_forms(placeholder.encode())))


def found_in(data: bytes, loans: Mapping[str, str]) -> str | None:
    """The name of the first secret whose placeholder (or a piece of it) `data` holds."""
    for placeholder, name in loans.items():
        if any(n in data for n in needles(placeholder)):
            return name
    return None


def swap(fields: Fields, path: str, body: bytes, place: Place, lent: Lent) -> Outcome:
    """The request with the real values in for the placeholders it carries where keys go and may go
    (module docstring), or what is misplaced."""
    if not lent.loans:
        return None
    head = b"\n".join(k + b": " + v for k, v in fields) + path.encode("utf-8", "surrogateescape")
    if found_in(head, lent.loans) is None:
        if (name := found_in(body, lent.loans)) is not None:
            return Misplaced(name, "in the body")
        return None
    names: list[str] = []
    out: list[tuple[bytes, bytes]] = []
    for key, value in fields:
        swapped = _header(key, value, place, lent, names)
        if isinstance(swapped, Misplaced):
            return swapped
        out.append((key, swapped))
    new_path = _query(path, place, lent, names)
    if isinstance(new_path, Misplaced):
        return new_path
    for key, value in out:
        if (name := found_in(key + b": " + value, lent.loans)) is not None:
            return Misplaced(name, f"in the header {key.decode('latin-1')}")
    if (name := found_in(new_path.encode("utf-8", "surrogateescape"), lent.loans)) is not None:
        return Misplaced(name, "in the URL")
    if (name := found_in(body, lent.loans)) is not None:
        return Misplaced(name, "in the body")
    return Swapped(tuple(out), new_path, tuple(dict.fromkeys(names)))


def _real(placeholder: str, where: str, place: Place, lent: Lent, names: list[str]) -> str | Misplaced:
    """The real value for `placeholder` sent to `place`, or why it may not go there."""
    name = lent.loans[placeholder]
    hosts = lent.hosts(name)
    value = lent.values.get(name)
    if value is None:
        return Misplaced(name, f"{where}: the proxy holds no value for it")
    if not any(allows(h, place) for h in hosts):
        bound = ", ".join(hosts) or "no host"
        return Misplaced(name, f"{where} to {place}, which is not its host ({bound})")
    names.append(name)
    return value


def _header(key: bytes, value: bytes, place: Place, lent: Lent, names: list[str]) -> bytes | Misplaced:
    lower = key.lower()
    text = value.decode("latin-1")
    if lower == b"authorization":
        scheme, _, credential = text.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() in BEARERS and credential in lent.loans:
            real = _real(credential, "as a bearer token", place, lent, names)
            return real if isinstance(real, Misplaced) else f"{scheme} {real}".encode("latin-1")
        if scheme.lower() == "basic":
            return _basic(scheme, credential, value, place, lent, names)
        return value
    if lower in KEY_HEADERS and text.strip() in lent.loans:
        real = _real(text.strip(), f"in {key.decode('latin-1')}", place, lent, names)
        return real if isinstance(real, Misplaced) else real.encode("latin-1")
    return value


def _basic(
    scheme: str, credential: str, value: bytes, place: Place, lent: Lent, names: list[str]
) -> bytes | Misplaced:
    """HTTP basic auth: a placeholder as the user or the password is swapped, re-encoded."""
    try:
        pair = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return value
    user, sep, password = pair.partition(":")
    parts = [user, password]
    for i, part in enumerate(parts):
        if part in lent.loans:
            real = _real(part, "in basic auth", place, lent, names)
            if isinstance(real, Misplaced):
                return real
            parts[i] = real
    if parts == [user, password]:
        return value
    encoded = base64.b64encode(f"{parts[0]}{sep}{parts[1]}".encode()).decode("ascii")
    return f"{scheme} {encoded}".encode("latin-1")


def _query(path: str, place: Place, lent: Lent, names: list[str]) -> str | Misplaced:
    """A query parameter whose whole value is a placeholder gets the real value (percent-encoded)."""
    base, sep, query = path.partition("?")
    if not sep:
        return path
    fragment = ""
    if "#" in query:
        query, _, fragment = query.partition("#")
        fragment = "#" + fragment
    parts = query.split("&")
    changed = False
    for i, part in enumerate(parts):
        key, eq, raw = part.partition("=")
        if eq and (placeholder := unquote(raw)) in lent.loans:
            real = _real(placeholder, f"in the query parameter {unquote(key)}", place, lent, names)
            if isinstance(real, Misplaced):
                return real
            parts[i] = f"{key}={quote(real, safe='')}"
            changed = True
    return f"{base}?{'&'.join(parts)}{fragment}" if changed else path
