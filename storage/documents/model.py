"""What the Directory's revision store takes and gives, without the database: changes, commits,
refusals, errors and the hashes that address documents and version sections.

Kept apart from the SQL so that reading a Directory (the stdlib SQLite path of
`storage.documents.reads`) never imports SQLAlchemy.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from storage.errors import StorageError

UNSAFE_IN_PATH = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""What ends a line or a cell of the text agents read; a path holding one is no row (the same set
as `catalog.folder`'s check, which a test holds equal)."""


def is_concept(bundle: str, path: str) -> bool:
    """Whether a stored document is one of the Directory's concepts (rows): a Markdown document of a
    bundle (the root bundle "" holds aliases.toml and bookkeeping), whose path is safe to list. The
    count a revision records, so `history` says what `snapshot` says."""
    return bool(bundle) and path.endswith(".md") and UNSAFE_IN_PATH.search(path) is None


class DocumentStoreError(StorageError):
    """A revision-store operation failed."""


class RevisionMismatch(DocumentStoreError):
    """The caller expected a head revision that is no longer the head."""

    def __init__(self, expected: int, head: int) -> None:
        super().__init__(f"expected revision {expected}, but the head is revision {head}")
        self.expected = expected
        self.head = head


Reason = Literal["exists", "stale", "missing", "needs-hash"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """One change whose precondition failed, with the document's current hash (None if absent)."""

    bundle: str
    path: str
    reason: Reason
    current: str | None


class PreconditionFailed(DocumentStoreError):
    """At least one change's `replaces` precondition failed; nothing was committed."""

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        super().__init__("; ".join(f"{r.bundle}/{r.path}: {r.reason}" for r in refusals))
        self.refusals = tuple(refusals)


class IndeterminateCommit(DocumentStoreError):
    """COMMIT itself failed: the revision may or may not have landed."""

    def __init__(self, revision: int, cause: str) -> None:
        super().__init__(f"commit of revision {revision} is indeterminate: {cause}")
        self.revision = revision


@dataclass(frozen=True, slots=True)
class Change:
    """Write `content` at `(bundle, path)` (or delete it when `content` is None).

    `replaces` is the hash the caller believes is current: None on a write asserts the document is
    new; a delete always needs it. `check=False` skips the precondition (folder sync, restore).
    """

    bundle: str
    path: str
    content: str | None
    replaces: str | None = None
    check: bool = True


@dataclass(frozen=True, slots=True)
class Commit:
    """What a committed revision did."""

    revision: int
    snapshot: str
    documents: int
    written: int
    deleted: int


def sha256_text(text: str) -> str:
    """The address of a document: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def section_tag(entries: Iterable[tuple[str, str]]) -> str:
    """The version tag of a section: the hash of its sorted `(path, hash)` list."""
    h = hashlib.sha256()
    for path, sha in sorted(entries):
        h.update(f"{path}\0{sha}\n".encode())
    return h.hexdigest()


def snapshot_digest(sections: Iterable[tuple[str, str]]) -> str:
    """The digest of a whole space: the hash of its sorted `(bundle, tag)` list."""
    h = hashlib.sha256()
    for bundle, tag in sorted(sections):
        h.update(f"{bundle}\0{tag}\n".encode())
    return h.hexdigest()


def chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    """`items` in lists of at most `size` (the bound on one query's parameters)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass(frozen=True, slots=True)
class Revision:
    """One committed revision, as `history` lists it."""

    revision: int
    parent: int | None
    at: datetime
    message: str
    changes: int
    documents: int
    snapshot: str
