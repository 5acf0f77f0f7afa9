"""The one grammar of a span of time as a person writes it: `90s`, `2m`, `1.5h`, `7d`, `500ms`.

Read wherever flightlog takes a duration in words: the egress policy's rate windows and budget
periods, a lent token's `expires` in the lending policy, `flightlog token mint --expires`. One
grammar so that what one file accepts another does not refuse.
"""

from __future__ import annotations

import re
from typing import Final

GRAMMAR: Final = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
"""A number (a fraction allowed), optional spaces, one unit."""
UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
"""Seconds per unit."""


def seconds(text: str) -> float | None:
    """The seconds `text` names (spaces around it ignored), or None when it is not a duration."""
    match = GRAMMAR.match(text.strip())
    return None if match is None else float(match.group(1)) * UNITS[match.group(2)]
