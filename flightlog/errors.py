"""Errors of the command line: each carries one line a person can act on."""

from formats.errors import FlightlogError


class CommandError(FlightlogError):
    """A command failed for a reason the user can fix; the CLI prints it as one line."""
