"""Errors of the egress policy. Each message is one line an operator can act on."""

from __future__ import annotations

from formats.errors import FlightlogError


class EgressError(FlightlogError):
    """Base of every error the egress policy raises."""


class PolicyFileError(EgressError):
    """The policy file cannot be read, or says something that is not a policy (the line names where)."""


class AskError(EgressError):
    """An approval that cannot be given: no such pending request, or it was already answered."""
