"""Errors of the Ledger, each translated from the library error at the boundary."""


class StorageError(Exception):
    """Base of every error the Ledger raises."""
