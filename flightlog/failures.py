"""The error types a user may see as one line: each package's base error."""

from __future__ import annotations

from addons.errors import AddonError
from catalog.errors import CatalogError
from egress.errors import EgressError
from flightlog.errors import CommandError
from formats.errors import FormatError
from recording.errors import RecordingError
from storage.errors import StorageError
from tui.errors import TuiError


def known_errors() -> tuple[type[Exception], ...]:
    """Every package's base error (each errors module is cheap to import: no library behind it)."""
    return (
        CommandError,
        StorageError,
        CatalogError,
        RecordingError,
        EgressError,
        AddonError,
        TuiError,
        FormatError,
    )
