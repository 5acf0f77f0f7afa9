"""The Directory's store: documents kept by content hash, committed in numbered revisions, in the
Ledger's database but in a room of their own (no Ledger module imports it, nor it one of them;
`pyproject.toml`'s import contracts). `store` says what each table means; this package gives the
names the Directory uses.
"""

from __future__ import annotations

from typing import Any

from storage.documents.model import (
    Change,
    Commit,
    DocumentStoreError,
    IndeterminateCommit,
    PreconditionFailed,
    Refusal,
    Revision,
    RevisionMismatch,
    section_tag,
    sha256_text,
    snapshot_digest,
)
from storage.documents.store import DocumentStore, open_document_store


def __getattr__(name: str) -> Any:
    """`metadata` (the tables as queries see them) on demand: importing it loads SQLAlchemy."""
    if name == "metadata":
        from storage.documents.tables import metadata

        return metadata
    raise AttributeError(name)


__all__ = [
    "Change",
    "Commit",
    "DocumentStore",
    "DocumentStoreError",
    "IndeterminateCommit",
    "PreconditionFailed",
    "Refusal",
    "Revision",
    "RevisionMismatch",
    "open_document_store",
    "section_tag",
    "sha256_text",
    "snapshot_digest",
]
