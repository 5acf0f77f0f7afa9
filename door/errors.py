"""Errors of the dispatch door: a route that cannot be served, a call the door refuses.

Each is a `formats.errors.FlightlogError`, so the command line shows it as one line; a refusal
(`door.checks.Refused`) also names the limit that refused, and is filed in the Ledger.
"""

from __future__ import annotations

from formats.errors import FlightlogError


class DoorError(FlightlogError):
    """Base of the door's errors."""


class RouteError(DoorError):
    """A route made without a verb and a target, or declaring a verb it did not list."""
