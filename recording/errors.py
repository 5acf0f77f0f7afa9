"""Errors of the recording pipeline: configuration it cannot use, bodies it cannot decode.

Each is a `RecordingError`, which the command line and the proxy's `configure()` show as one line.
"""

from __future__ import annotations

from formats.errors import FlightlogError


class RecordingError(FlightlogError):
    """Base of the recording pipeline's errors."""


class SecretsError(RecordingError):
    """The secrets file or a named environment variable cannot be used."""


class PriceError(RecordingError):
    """A price table file is unreadable or malformed."""


class RedactError(RecordingError):
    """Redaction was configured with something it cannot use."""
