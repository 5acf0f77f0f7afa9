"""Errors of readback: a recorded exchange that cannot be sent again, exported, matched or served.

Each is a `formats.errors.FlightlogError`, so the command line shows it as one line.
"""

from __future__ import annotations

from formats.errors import FlightlogError


class ReadbackError(FlightlogError):
    """Base of readback's errors (also: the Ledger's read routes cannot start)."""


class ReplayError(ReadbackError):
    """A recorded request that cannot be sent again as asked."""


class ExportError(ReadbackError):
    """An export that cannot be written as asked."""


class OtlpError(ReadbackError):
    """The receiver refused the spans or could not be reached."""


class MatchingError(ReadbackError):
    """A strategy list or a rules file that cannot be used (one clear line)."""


class DriftError(ReadbackError):
    """A `--fail-on` rule that does not parse."""
