"""Errors of the proxy's addons: the base every wing's errors derive from, and the hook classes' own.

Each wing keeps its errors in its package's `errors.py` (`wire`, `readback`); the command line and
the proxy catch `AddonError` and show one line. The recording pipeline, a package of its own, has its
own base (`recording.errors.RecordingError`), caught beside this one.
"""


class AddonError(Exception):
    """Base of every error the addons raise."""


class ServeReplayError(AddonError):
    """serve-replay was asked for something it cannot do (a mode it cannot parse, a busy port)."""
