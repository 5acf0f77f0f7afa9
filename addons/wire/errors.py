"""Errors of the HTTP wire: bytes off a socket that are not the HTTP/1 they should be.

Both are `ValueError`s too (what they were before they had a room), so a caller that reads bytes
may treat them as bad input.
"""

from __future__ import annotations

from addons.errors import AddonError


class WireError(AddonError, ValueError):
    """Base of the wire's errors."""


class HeadError(WireError):
    """Bytes that are not an HTTP/1 head."""


class FramingError(WireError):
    """A body whose framing cannot be followed."""
