"""The error a user may see as one line: flightlog's one root (`formats.errors.FlightlogError`)."""

from __future__ import annotations

from formats.errors import FlightlogError


def known_errors() -> tuple[type[Exception], ...]:
    """The errors the command line prints as one line: every tree flightlog raises on purpose."""
    return (FlightlogError,)
