"""Errors of readback: a recorded exchange that cannot be sent again, exported or served as asked.

Each is an `AddonError`, so the command line shows it as one line.
"""

from __future__ import annotations

from addons.errors import AddonError


class ReadbackError(AddonError):
    """Base of the readback wing's errors (also: the Ledger's read routes cannot start)."""


class ReplayError(ReadbackError):
    """A recorded request that cannot be sent again as asked."""


class ExportError(ReadbackError):
    """An export that cannot be written as asked."""


class OtlpError(ReadbackError):
    """The receiver refused the spans or could not be reached."""
