"""Errors of the terminal browser."""

from formats.errors import FlightlogError


class TuiError(FlightlogError):
    """Base of every error the browser raises."""
