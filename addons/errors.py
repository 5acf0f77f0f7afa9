"""Errors of the proxy's addons (the mitmproxy shells): a proxy that cannot start, a mode it cannot take.

Each is a `formats.errors.FlightlogError`, the one root the command line shows as one line.
"""

from formats.errors import FlightlogError


class AddonError(FlightlogError):
    """Base of every error the addons raise."""


class ServeReplayError(AddonError):
    """serve-replay was asked for something it cannot do (a mode it cannot parse, a busy port)."""
