"""Errors of the Ledger, each translated from the library error at the boundary.

Every message is one line a person can act on; the CLI prints it as `flightlog: ...`.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error the Ledger raises."""


class LedgerUnavailable(StorageError):
    """The database cannot be reached (down, restarting, wrong URL); the caller may retry."""


class BlobStoreUnavailable(StorageError):
    """The blob store cannot be reached; nothing that needs it was committed, the caller may retry."""


class InvalidEvent(StorageError):
    """One event of a batch is malformed; the whole batch was rolled back."""

    def __init__(self, event_id: str, reason: str) -> None:
        super().__init__(f"event {event_id!r} is invalid: {reason}; the batch was not committed")
        self.event_id = event_id
        self.reason = reason


class AppendOnlyViolation(StorageError):
    """Something tried to change or remove a recorded event; the database refused it."""


class CorruptPayload(StorageError):
    """Stored bytes do not match their address: they are refused, never returned."""

    def __init__(self, sha256: str, detail: str) -> None:
        super().__init__(f"payload {sha256} is corrupt ({detail}); refusing to return it")
        self.sha256 = sha256


class MissingPayload(StorageError):
    """The Ledger names a payload that is not where it should be."""

    def __init__(self, sha256: str, detail: str = "not in the ledger") -> None:
        super().__init__(f"payload {sha256} is missing ({detail})")
        self.sha256 = sha256


class DiskFull(StorageError):
    """The disk holding the Ledger is full; the batch was rolled back, earlier ones are intact."""


class BadLedgerUrl(StorageError):
    """A ledger or blob-store URL flightlog cannot use."""
