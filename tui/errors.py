"""Errors of the terminal browser."""


class TuiError(Exception):
    """Base of every error the browser raises."""
