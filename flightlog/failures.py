"""The error types a user may see as one line: each package's base error."""

from __future__ import annotations

from flightlog.errors import CommandError


def known_errors() -> tuple[type[Exception], ...]:
    """Every package's base error, imported lazily so `--help` does not pay for it."""
    from addons.errors import AddonError
    from catalog.errors import CatalogError
    from storage.errors import StorageError
    from tui.errors import TuiError

    return (CommandError, StorageError, CatalogError, AddonError, TuiError)
