"""Whether a process still runs: the egress room's records (held asks, lent placeholders) belong to a
process and stand for nothing once it has gone."""

from __future__ import annotations

import os


def alive(pid: object) -> bool:
    """Whether `pid` names a running process (one we may not signal runs too); anything that is not a
    positive int is no process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
