"""Errors of reading recorded bytes: a content coding that cannot be undone, or undone past its cap.

Most readers in `formats` never raise on bad input (they answer None or `invalid`); the codings do,
because their callers must choose: keep the raw bytes and say why. Each is a `FormatError`, which
the command line shows as one line.
"""

from __future__ import annotations


class FlightlogError(Exception):
    """The root of every error flightlog raises on purpose: one line a user can act on.

    It lives on the lowest floor so that every room can derive its own tree from it (`StorageError`,
    `CatalogError`, `RecordingError`, `EgressError`, `ReadbackError`, `DoorError`, `AddonError`,
    `TuiError`, `CommandError`, ...); the command line catches this one class and prints its message,
    and anything else is a bug that keeps its traceback.
    """


class FormatError(FlightlogError):
    """Base of the errors `formats` raises."""


class CodingError(FormatError):
    """A body could not be decoded with the content coding its header names (unknown or corrupt)."""


class DecodeCapError(CodingError):
    """Decoding stopped at its cap: the body decodes to more than the caller agreed to hold."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"decoded size passed its cap of {cap:,} bytes; decoding stopped there")
        self.cap = cap
