"""Errors of the proxy's addons."""


class AddonError(Exception):
    """Base of every error the addons raise."""
