"""Committing to the Directory's revision store: one revision, all changes or none.

A commit bumps the head first (taking the write lock on both engines: SQLite's BEGIN IMMEDIATE,
PostgreSQL's row lock), checks every precondition against the locked head, then writes the
documents, the changes, the head tree, the section tags and the revision row. A failure before
the final COMMIT rolls back and says so; a failure *during* COMMIT is `IndeterminateCommit`,
because nobody can say whether it landed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.document_model import (
    Change,
    Commit,
    DocumentStoreError,
    IndeterminateCommit,
    PreconditionFailed,
    Refusal,
    RevisionMismatch,
    chunks,
    section_tag,
    sha256_text,
    snapshot_digest,
)
from storage.document_tables import (
    changes_table,
    documents_table,
    refs_table,
    revisions_table,
    sections_table,
    tree_table,
)
from storage.engine import WRITE


class Committer:
    """The write path of one space."""

    def __init__(self, engine: Engine, space: str) -> None:
        self.engine = engine
        self.space = space

    def commit(self, changes: Sequence[Change], *, expected: int | None = None, message: str = "") -> Commit:
        """Commit `changes` as one revision, all or nothing.

        Raises `RevisionMismatch` when `expected` is not the head, `PreconditionFailed` listing every
        refused change, `IndeterminateCommit` when COMMIT itself failed.
        """
        keys = [(c.bundle, c.path) for c in changes]
        if len(set(keys)) != len(keys):
            raise DocumentStoreError("two changes target the same document")
        try:
            conn = self.engine.connect().execution_options(**WRITE)
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e
        with conn:
            trans = conn.begin()
            try:
                result = self._apply(conn, changes, expected, message)
            except SQLAlchemyError as e:
                trans.rollback()
                raise DocumentStoreError(f"directory commit failed: {e}".splitlines()[0]) from e
            except BaseException:
                trans.rollback()
                raise
            try:
                trans.commit()
            except SQLAlchemyError as e:
                raise IndeterminateCommit(result.revision, str(e).splitlines()[0]) from e
        return result

    def _apply(
        self, conn: Connection, changes: Sequence[Change], expected: int | None, message: str
    ) -> Commit:
        head = self._lock_head(conn)
        if expected is not None and expected != head:
            raise RevisionMismatch(expected, head)
        t = tree_table
        current: dict[tuple[str, str], str] = {}
        for bundles in chunks(sorted({c.bundle for c in changes}), 200):
            rows = conn.execute(
                sa.select(t.c.bundle, t.c.path, t.c.sha256).where(
                    t.c.space == self.space, t.c.bundle.in_(bundles)
                )
            )
            current.update({(b, p): h for b, p, h in rows})
        refusals = [r for c in changes if (r := _refusal(c, current.get((c.bundle, c.path))))]
        if refusals:
            raise PreconditionFailed(refusals)
        revision = head + 1
        written = deleted = 0
        new_docs: dict[str, str] = {}
        change_rows: list[dict[str, Any]] = []
        gone: list[dict[str, Any]] = []
        for c in changes:
            key = (c.bundle, c.path)
            if c.content is None:
                if key in current:
                    deleted += 1
                    del current[key]
                    change_rows.append({"bundle": c.bundle, "path": c.path, "sha256": None})
                    gone.append({"k_bundle": c.bundle, "k_path": c.path})
                continue
            sha = sha256_text(c.content)
            if current.get(key) == sha:
                continue
            new_docs[sha] = c.content
            if key in current:
                gone.append({"k_bundle": c.bundle, "k_path": c.path})
            current[key] = sha
            written += 1
            change_rows.append({"bundle": c.bundle, "path": c.path, "sha256": sha})
        self._replace_entries(conn, gone, [row for row in change_rows if row["sha256"] is not None])
        self._store_documents(conn, new_docs)
        if change_rows:
            conn.execute(
                sa.insert(changes_table),
                [{"space": self.space, "revision": revision, **row} for row in change_rows],
            )
        self._retag(conn, {row["bundle"] for row in change_rows})
        tags = conn.execute(
            sa.select(sections_table.c.bundle, sections_table.c.tag, sections_table.c.documents).where(
                sections_table.c.space == self.space
            )
        ).all()
        snapshot = snapshot_digest((b, tag) for b, tag, _ in tags)
        documents = sum(n for _, _, n in tags)
        conn.execute(
            sa.insert(revisions_table).values(
                space=self.space,
                revision=revision,
                parent=head or None,
                at=datetime.now(UTC),
                message=message,
                changes=len(change_rows),
                documents=documents,
                snapshot=snapshot,
            )
        )
        return Commit(revision, snapshot, documents, written, deleted)

    def _lock_head(self, conn: Connection) -> int:
        """Advance the head by one (the write lock), returning the head before it."""
        r = refs_table
        bumped = conn.execute(
            sa.update(r).where(r.c.space == self.space).values(revision=r.c.revision + 1)
        ).rowcount
        if not bumped:
            conn.execute(sa.insert(r).values(space=self.space, revision=1))
            return 0
        new = conn.execute(sa.select(r.c.revision).where(r.c.space == self.space)).scalar_one()
        return int(new) - 1

    def _replace_entries(
        self, conn: Connection, gone: list[dict[str, Any]], added: list[dict[str, Any]]
    ) -> None:
        """Delete the tree entries `gone` names, then insert the `added` (bundle, path, sha256)
        entries into this space, each as one executemany.

        A change names each document once (`commit` refuses two for one path), so deleting every
        replaced or removed entry first and inserting after is the same as doing it change by change.
        One statement a change held SQLite's write lock for 2.8 s while a 25k-row folder was first
        imported, and every proxy recording into the same Ledger waited that long to commit."""
        t = tree_table
        if gone:
            conn.execute(
                sa.delete(t).where(
                    t.c.space == self.space,
                    t.c.bundle == sa.bindparam("k_bundle"),
                    t.c.path == sa.bindparam("k_path"),
                ),
                gone,
            )
        if added:
            conn.execute(sa.insert(t), [{"space": self.space, **row} for row in added])

    def _store_documents(self, conn: Connection, docs: dict[str, str]) -> None:
        if not docs:
            return
        d = documents_table
        present: set[str] = set()
        for chunk in chunks(sorted(docs), 500):
            present.update(conn.execute(sa.select(d.c.sha256).where(d.c.sha256.in_(chunk))).scalars())
        rows = [
            {"sha256": sha, "size": len(text.encode("utf-8")), "content": text}
            for sha, text in sorted(docs.items())
            if sha not in present
        ]
        if rows:
            conn.execute(sa.insert(d), rows)

    def _retag(self, conn: Connection, bundles: set[str]) -> None:
        t, s = tree_table, sections_table
        for bundle in sorted(bundles):
            entries = conn.execute(
                sa.select(t.c.path, t.c.sha256).where(t.c.space == self.space, t.c.bundle == bundle)
            ).all()
            conn.execute(sa.delete(s).where(s.c.space == self.space, s.c.bundle == bundle))
            if entries:
                conn.execute(
                    sa.insert(s).values(
                        space=self.space,
                        bundle=bundle,
                        tag=section_tag((p, h) for p, h in entries),
                        documents=len(entries),
                    )
                )


def _refusal(change: Change, current: str | None) -> Refusal | None:
    """The precondition of one change against the current hash, or None when it holds."""
    if not change.check:
        return None
    where = (change.bundle, change.path)
    if change.content is None:
        if current is None:
            return Refusal(*where, "missing", None)
        if change.replaces is None:
            return Refusal(*where, "needs-hash", current)
        return None if change.replaces == current else Refusal(*where, "stale", current)
    if change.replaces is None:
        return None if current is None else Refusal(*where, "exists", current)
    if current is None:
        return Refusal(*where, "missing", None)
    return None if change.replaces == current else Refusal(*where, "stale", current)
