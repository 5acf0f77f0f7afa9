"""Errors of the Ledger, each translated from the library error at the boundary.

Every message is one line a person can act on; the CLI prints it as `flightlog: ...`.
"""

from __future__ import annotations

from formats.errors import FlightlogError


class StorageError(FlightlogError):
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


class PrunedPayload(StorageError):
    """A payload whose bytes were removed under a signed prune record (`storage.retention.prune`):
    its events stay, and readers show when and why instead of bytes."""

    def __init__(self, sha256: str, at: str, reason: str) -> None:
        self.sha256, self.at, self.reason = sha256, at, reason
        self.note = f"pruned on {at[:10]} ({reason})"
        super().__init__(f"payload {sha256} was {self.note}")


class DiskFull(StorageError):
    """The disk holding the Ledger is full; the batch was rolled back, earlier ones are intact."""


class BadLedgerUrl(StorageError):
    """A ledger or blob-store URL flightlog cannot use."""


class LedgerBusy(LedgerUnavailable):
    """A lock wait timed out or a deadlock was broken; the same batch can be sent again."""


class RecordRefused(StorageError):
    """The database refused what a batch holds (a constraint, a value it cannot store): sending the
    same batch again cannot help, but its other events can be written one by one."""


# -- library errors by type (never by message text) --------------------------------------------------

_SQLITE_FULL = 13
_SQLITE_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_UNREACHABLE = frozenset({8, 10, 14, 15, 26})  # READONLY, IOERR, CANTOPEN, PROTOCOL, NOTADB
_SQLITE_REFUSED = frozenset({18, 19, 20, 25})  # TOOBIG, CONSTRAINT, MISMATCH, RANGE
_SQLITE_CONSTRAINT_TRIGGER = 1811
_PG_BUSY = frozenset({"55P03", "40P01", "40001", "57014"})  # lock timeout, deadlock, serialization, cancel
_PG_FULL = frozenset({"53100"})
_PG_REFUSED_CLASSES = frozenset({"22", "23", "54"})  # data exception, integrity, program limit
_PG_APPEND_ONLY = "42501"  # the append-only triggers raise insufficient_privilege
_PG_NO_SCHEMA = frozenset({"42P01", "3F000"})  # undefined table, invalid schema: not a usable ledger now


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__).removeprefix("flightlog: ")


def _sqlite(error: Exception, url: str) -> StorageError | None:
    import sqlite3

    if not isinstance(error, sqlite3.Error):
        return None
    code = getattr(error, "sqlite_errorcode", None)
    line = _first_line(error)
    if code is None:
        # No result code: the driver itself refused (a closed connection, a value it cannot bind).
        if isinstance(error, sqlite3.ProgrammingError | sqlite3.InterfaceError):
            return RecordRefused(f"ledger {url} refused a value: {line}")
        return None
    if code == _SQLITE_CONSTRAINT_TRIGGER:
        return AppendOnlyViolation(line)
    primary = code & 0xFF
    if primary == _SQLITE_FULL:
        return DiskFull(f"the disk holding {url} is full ({line}); the batch was rolled back")
    if primary in _SQLITE_BUSY:
        return LedgerBusy(f"the ledger at {url} is locked ({line}); will retry")
    if primary in _SQLITE_UNREACHABLE:
        return LedgerUnavailable(f"cannot reach the ledger at {url}: {line}")
    if primary in _SQLITE_REFUSED:
        return RecordRefused(f"ledger {url} refused the batch: {line}")
    return None


def _psycopg(error: Exception, url: str) -> StorageError | None:
    if not type(error).__module__.startswith("psycopg"):
        return None
    import psycopg

    if not isinstance(error, psycopg.Error):
        return None
    state = error.sqlstate or ""
    line = _first_line(error)
    if state == _PG_APPEND_ONLY:
        return AppendOnlyViolation(line)
    if state in _PG_FULL:
        return DiskFull(f"the disk holding {url} is full ({line}); the batch was rolled back")
    if state in _PG_BUSY:
        return LedgerBusy(f"the ledger at {url} is busy ({line}); will retry")
    if state in _PG_NO_SCHEMA:
        return LedgerUnavailable(f"the ledger at {url} has lost its tables ({line})")
    if state[:2] in _PG_REFUSED_CLASSES:
        return RecordRefused(f"ledger {url} refused the batch: {line}")
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        # Class 08 (connection), 57P0x (shutdown), 53xxx (resources) and failures with no state
        # at all (a refused connect): the server is not there to take the batch.
        return LedgerUnavailable(f"cannot reach the ledger at {url}: {line}")
    if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
        return RecordRefused(f"ledger {url} refused the batch: {line}")
    return None


def _is_pool_timeout(error: BaseException) -> bool:
    if not type(error).__module__.startswith("sqlalchemy"):
        return False
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    return isinstance(error, PoolTimeout)


def from_library(error: BaseException, url: str) -> StorageError | None:
    """The Ledger's error for a database library's error, by its type and result code; None for
    an error this table does not know (the caller re-raises it: an unknown error is a bug to see,
    not an outage to wait out).

    `error` is a driver's own exception (raw cursors raise them unwrapped) or SQLAlchemy's wrapper
    (whose `orig` is the driver's). A string the driver cannot encode (a lone surrogate) is a record
    the database refuses."""
    if isinstance(error, StorageError):
        return error
    if getattr(error, "connection_invalidated", False):
        return LedgerUnavailable(f"lost the connection to the ledger at {url}: {_first_line(error)}")
    if _is_pool_timeout(error):
        return LedgerBusy(f"no free connection to the ledger at {url}: {_first_line(error)}")
    orig = getattr(error, "orig", None)
    if isinstance(orig, Exception):
        error = orig
    if isinstance(error, UnicodeError):
        return RecordRefused(f"ledger {url} cannot store a text value: {_first_line(error)}")
    if not isinstance(error, Exception):
        return None
    return _sqlite(error, url) or _psycopg(error, url)
