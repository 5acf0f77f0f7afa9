"""Errors of the Directory. Each message is one line a person (or a model) can act on."""

from __future__ import annotations


class CatalogError(Exception):
    """Base of every error the Directory raises."""


class UnknownRow(CatalogError):
    """No row has this id or name."""


class UnknownBundle(CatalogError):
    """No bundle has this name; the message lists the bundles that exist."""


class BadAlias(CatalogError):
    """`aliases.toml` is malformed or names a row that does not exist."""


class BadPath(CatalogError):
    """A write or delete aimed at something that is not a document of a bundle."""


class BadFolder(CatalogError):
    """A Directory folder that cannot be read or written."""


class Refused(CatalogError):
    """A precondition failed; `retry_hash` is the current hash to retry with (None: do not retry)."""

    def __init__(self, message: str, retry_hash: str | None = None) -> None:
        super().__init__(message)
        self.retry_hash = retry_hash


class RevisionConflict(CatalogError):
    """The expected revision is not the head any more."""

    def __init__(self, message: str, head: int) -> None:
        super().__init__(message)
        self.head = head


class Indeterminate(CatalogError):
    """A commit failed after it began changing the head: it may or may not have landed."""

    def __init__(self, message: str, revision: int) -> None:
        super().__init__(message)
        self.revision = revision


class StoreFailed(CatalogError):
    """The revision store underneath failed (translated from storage's error)."""
