"""Errors of the Directory."""


class CatalogError(Exception):
    """Base of every error the Directory raises."""
