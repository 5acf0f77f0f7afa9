"""Errors of token authority: a token that cannot be read or minted, a caveat, a gate's refusal.

Each is a `catalog.errors.CatalogError` (authority judges the Directory's rows, and every door that
answers a Directory error in one line answers these the same way), under `AuthorityError`.
"""

from __future__ import annotations

from catalog.errors import CatalogError


class AuthorityError(CatalogError):
    """Base of token authority's errors."""
