"""The Directory's revision store: documents kept by content hash, committed in numbered revisions.

The store knows nothing about Markdown or rows; it keeps text documents addressed by
`(bundle, path)` inside a named *space* (one Directory), and commits changes to them in revisions:

- `directory_documents`: every document text ever committed, once, under its SHA-256.
- `directory_refs`: the head revision of each space (the row a commit locks first).
- `directory_revisions` / `directory_changes`: the history, append-only by use: a revision lists the
  documents it wrote (hash) or deleted (NULL hash). Any past state is a query over changes.
- `directory_tree`: the head state, one row per live document (derived from changes, kept for speed).
- `directory_sections`: the version tag (hash of its `(path, hash)` list) of each bundle at head.
- `directory_index`: derived read models, one per section, with the tag they were built from.
- `directory_folders`: for a space seeded from a folder, a cheap stat tag per bundle subfolder.

A commit is one transaction: it bumps the head first (taking the write lock on both engines),
checks every precondition against the locked head, then writes. A failure before the final COMMIT
rolls back and is reported as such; a failure *during* COMMIT is reported as `IndeterminateCommit`
because nobody can say whether it landed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.engine import WRITE
from storage.errors import StorageError

metadata = sa.MetaData()
"""The tables as queries see them; migration 0002 creates them (a test checks the two agree)."""
_tz = sa.DateTime(timezone=True)

documents_table = sa.Table(
    "directory_documents",
    metadata,
    sa.Column("sha256", sa.Text, primary_key=True),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
)
refs_table = sa.Table(
    "directory_refs",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, nullable=False),
)
revisions_table = sa.Table(
    "directory_revisions",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, primary_key=True),
    sa.Column("parent", sa.Integer, nullable=True),
    sa.Column("at", _tz, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("changes", sa.Integer, nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
    sa.Column("snapshot", sa.Text, nullable=False),
)
changes_table = sa.Table(
    "directory_changes",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("revision", sa.Integer, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("sha256", sa.Text, nullable=True),
)
sa.Index(
    "ix_directory_changes_path",
    changes_table.c.space,
    changes_table.c.bundle,
    changes_table.c.path,
    changes_table.c.revision,
)
tree_table = sa.Table(
    "directory_tree",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("sha256", sa.Text, nullable=False),
)
sections_table = sa.Table(
    "directory_sections",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("tag", sa.Text, nullable=False),
    sa.Column("documents", sa.Integer, nullable=False),
)
index_table = sa.Table(
    "directory_index",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("tag", sa.Text, nullable=False),
    sa.Column("data", sa.LargeBinary, nullable=False),
)
folders_table = sa.Table(
    "directory_folders",
    metadata,
    sa.Column("space", sa.Text, primary_key=True),
    sa.Column("bundle", sa.Text, primary_key=True),
    sa.Column("stat_tag", sa.Text, nullable=False),
)


class DocumentStoreError(StorageError):
    """A revision-store operation failed."""


class RevisionMismatch(DocumentStoreError):
    """The caller expected a head revision that is no longer the head."""

    def __init__(self, expected: int, head: int) -> None:
        super().__init__(f"expected revision {expected}, but the head is revision {head}")
        self.expected = expected
        self.head = head


Reason = Literal["exists", "stale", "missing", "needs-hash"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """One change whose precondition failed, with the document's current hash (None if absent)."""

    bundle: str
    path: str
    reason: Reason
    current: str | None


class PreconditionFailed(DocumentStoreError):
    """At least one change's `replaces` precondition failed; nothing was committed."""

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        super().__init__("; ".join(f"{r.bundle}/{r.path}: {r.reason}" for r in refusals))
        self.refusals = tuple(refusals)


class IndeterminateCommit(DocumentStoreError):
    """COMMIT itself failed: the revision may or may not have landed."""

    def __init__(self, revision: int, cause: str) -> None:
        super().__init__(f"commit of revision {revision} is indeterminate: {cause}")
        self.revision = revision


@dataclass(frozen=True, slots=True)
class Change:
    """Write `content` at `(bundle, path)` (or delete it when `content` is None).

    `replaces` is the hash the caller believes is current: None on a write asserts the document is
    new; a delete always needs it. `check=False` skips the precondition (folder sync, restore).
    """

    bundle: str
    path: str
    content: str | None
    replaces: str | None = None
    check: bool = True


@dataclass(frozen=True, slots=True)
class Commit:
    """What a committed revision did."""

    revision: int
    snapshot: str
    documents: int
    written: int
    deleted: int


@dataclass(frozen=True, slots=True)
class Revision:
    """One committed revision, as `history` lists it."""

    revision: int
    parent: int | None
    at: datetime
    message: str
    changes: int
    documents: int
    snapshot: str


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A section's current tag beside the tag (and data) of its stored derived index, if any."""

    bundle: str
    tag: str
    documents: int
    index_tag: str | None
    data: bytes | None


def sha256_text(text: str) -> str:
    """The address of a document: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def section_tag(entries: Iterable[tuple[str, str]]) -> str:
    """The version tag of a section: the hash of its sorted `(path, hash)` list."""
    h = hashlib.sha256()
    for path, sha in sorted(entries):
        h.update(f"{path}\0{sha}\n".encode())
    return h.hexdigest()


def snapshot_digest(sections: Iterable[tuple[str, str]]) -> str:
    """The digest of a whole space: the hash of its sorted `(bundle, tag)` list."""
    h = hashlib.sha256()
    for bundle, tag in sorted(sections):
        h.update(f"{bundle}\0{tag}\n".encode())
    return h.hexdigest()


class DocumentStore:
    """One space of the revision store, on an engine the caller owns."""

    def __init__(self, engine: Engine, space: str) -> None:
        self.engine = engine
        self.space = space

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e

    # ---- reads -------------------------------------------------------------------------------

    def head(self) -> int:
        """The head revision (0 for a space nothing was ever committed to)."""
        with self._read() as conn:
            value = conn.execute(
                sa.select(refs_table.c.revision).where(refs_table.c.space == self.space)
            ).scalar()
        return int(value or 0)

    def sections(self) -> dict[str, str]:
        """Each bundle's version tag at head."""
        with self._read() as conn:
            rows = conn.execute(
                sa.select(sections_table.c.bundle, sections_table.c.tag).where(
                    sections_table.c.space == self.space
                )
            )
            return {b: t for b, t in rows}

    def index_entries(self) -> list[IndexEntry]:
        """Every section's tag and its stored derived index (one read)."""
        s, i = sections_table, index_table
        query = (
            sa.select(s.c.bundle, s.c.tag, s.c.documents, i.c.tag, i.c.data)
            .select_from(s.outerjoin(i, sa.and_(i.c.space == s.c.space, i.c.bundle == s.c.bundle)))
            .where(s.c.space == self.space)
            .order_by(s.c.bundle)
        )
        with self._read() as conn:
            return [IndexEntry(b, t, n, it, d) for b, t, n, it, d in conn.execute(query)]

    def index_data(self, bundles: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """The stored derived index of some sections: `bundle -> (tag, data)`."""
        i = index_table
        out: dict[str, tuple[str, bytes]] = {}
        with self._read() as conn:
            for chunk in _chunks(sorted(bundles), 200):
                query = sa.select(i.c.bundle, i.c.tag, i.c.data).where(
                    i.c.space == self.space, i.c.bundle.in_(chunk)
                )
                out.update({b: (t, bytes(d)) for b, t, d in conn.execute(query)})
        return out

    def save_index(self, bundle: str, tag: str, data: bytes) -> None:
        """Keep the derived index of one section, built from the section at `tag`."""
        key = sa.and_(index_table.c.space == self.space, index_table.c.bundle == bundle)
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.delete(index_table).where(key))
                conn.execute(
                    sa.insert(index_table).values(space=self.space, bundle=bundle, tag=tag, data=data)
                )
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory index: {e}".splitlines()[0]) from e

    def tree(self, bundle: str | None = None) -> dict[tuple[str, str], str]:
        """The head state: `(bundle, path) -> hash`, optionally for one bundle."""
        t = tree_table
        query = sa.select(t.c.bundle, t.c.path, t.c.sha256).where(t.c.space == self.space)
        if bundle is not None:
            query = query.where(t.c.bundle == bundle)
        with self._read() as conn:
            return {(b, p): h for b, p, h in conn.execute(query)}

    def tree_at(self, revision: int) -> dict[tuple[str, str], str]:
        """The state as of `revision`: for every path, its latest change at or before it."""
        c = changes_table
        latest = (
            sa.select(c.c.bundle, c.c.path, sa.func.max(c.c.revision).label("rev"))
            .where(c.c.space == self.space, c.c.revision <= revision)
            .group_by(c.c.bundle, c.c.path)
            .subquery()
        )
        query = sa.select(c.c.bundle, c.c.path, c.c.sha256).join(
            latest,
            sa.and_(c.c.bundle == latest.c.bundle, c.c.path == latest.c.path, c.c.revision == latest.c.rev),
        )
        query = query.where(c.c.space == self.space, c.c.sha256.is_not(None))
        with self._read() as conn:
            return {(b, p): h for b, p, h in conn.execute(query)}

    def hash_of(self, bundle: str, path: str) -> str | None:
        """The current hash of one document, or None when it does not exist."""
        t = tree_table
        query = sa.select(t.c.sha256).where(t.c.space == self.space, t.c.bundle == bundle, t.c.path == path)
        with self._read() as conn:
            value = conn.execute(query).scalar()
        return str(value) if value is not None else None

    def contents(self, hashes: Iterable[str]) -> dict[str, str]:
        """Document texts by hash (one targeted read)."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        d = documents_table
        out: dict[str, str] = {}
        with self._read() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                for sha, text in conn.execute(
                    sa.select(d.c.sha256, d.c.content).where(d.c.sha256.in_(chunk))
                ):
                    out[sha] = text
        return out

    def bundle_documents(self, bundle: str) -> list[tuple[str, str, str]]:
        """Every live document of one bundle as `(path, hash, text)`, sorted by path."""
        t, d = tree_table, documents_table
        query = (
            sa.select(t.c.path, t.c.sha256, d.c.content)
            .join(d, d.c.sha256 == t.c.sha256)
            .where(t.c.space == self.space, t.c.bundle == bundle)
            .order_by(t.c.path)
        )
        with self._read() as conn:
            return [(p, h, c) for p, h, c in conn.execute(query)]

    def revision(self, revision: int) -> Revision | None:
        """One revision's record."""
        found = self.history(before=revision + 1, limit=1)
        return found[0] if found and found[0].revision == revision else None

    def history(self, before: int | None = None, limit: int = 20) -> list[Revision]:
        """Committed revisions, newest first, strictly below `before` when given."""
        r = revisions_table
        query = sa.select(r).where(r.c.space == self.space)
        if before is not None:
            query = query.where(r.c.revision < before)
        query = query.order_by(r.c.revision.desc()).limit(limit)
        with self._read() as conn:
            return [
                Revision(
                    row.revision,
                    row.parent,
                    _utc(row.at),
                    row.message,
                    row.changes,
                    row.documents,
                    row.snapshot,
                )
                for row in conn.execute(query)
            ]

    def folder_tags(self) -> dict[str, str]:
        """The stat tag of every bundle subfolder last synced into this space."""
        f = folders_table
        with self._read() as conn:
            rows = conn.execute(sa.select(f.c.bundle, f.c.stat_tag).where(f.c.space == self.space))
            return {b: t for b, t in rows}

    def save_folder_tags(self, tags: dict[str, str]) -> None:
        """Remember the stat tags of the folder just synced."""
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.delete(folders_table).where(folders_table.c.space == self.space))
                if tags:
                    conn.execute(
                        sa.insert(folders_table),
                        [{"space": self.space, "bundle": b, "stat_tag": t} for b, t in sorted(tags.items())],
                    )
        except SQLAlchemyError as e:
            raise DocumentStoreError(f"directory store: {e}".splitlines()[0]) from e

    # ---- the one write path ------------------------------------------------------------------

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
        for bundles in _chunks(sorted({c.bundle for c in changes}), 200):
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
        for c in changes:
            key = (c.bundle, c.path)
            if c.content is None:
                if key in current:
                    deleted += 1
                    del current[key]
                    change_rows.append({"bundle": c.bundle, "path": c.path, "sha256": None})
                    conn.execute(
                        sa.delete(t).where(
                            t.c.space == self.space, t.c.bundle == c.bundle, t.c.path == c.path
                        )
                    )
                continue
            sha = sha256_text(c.content)
            if current.get(key) == sha:
                continue
            new_docs[sha] = c.content
            if key in current:
                conn.execute(
                    sa.delete(t).where(t.c.space == self.space, t.c.bundle == c.bundle, t.c.path == c.path)
                )
            conn.execute(sa.insert(t).values(space=self.space, bundle=c.bundle, path=c.path, sha256=sha))
            current[key] = sha
            written += 1
            change_rows.append({"bundle": c.bundle, "path": c.path, "sha256": sha})
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

    def _store_documents(self, conn: Connection, docs: dict[str, str]) -> None:
        if not docs:
            return
        d = documents_table
        present: set[str] = set()
        for chunk in _chunks(sorted(docs), 500):
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


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time this store gives out is UTC-aware."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def open_document_store(url: str, space: str) -> DocumentStore:
    """A store on its own engine for the Ledger's `url`, the schema created or migrated first.

    A database already at the newest revision skips alembic entirely (importing it costs more
    than the rest of opening a Directory): `schema_is_current` reads `alembic_version` directly.
    """
    from storage.engine import make_engine

    engine = make_engine(url)
    try:
        if not schema_is_current(engine):
            from storage.migrate import migrate

            migrate(engine)
    except SQLAlchemyError as e:
        engine.dispose()
        raise DocumentStoreError(f"cannot open the directory store at {url}: {e}".splitlines()[0]) from e
    return DocumentStore(engine, space)


def newest_revision() -> str:
    """The newest migration's revision id, from the versions folder (`NNNN_name.py` files)."""
    versions = Path(__file__).parent / "migrations" / "versions"
    return max(p.name.split("_", 1)[0] for p in versions.glob("[0-9]*_*.py"))


def schema_is_current(engine: Engine) -> bool:
    """Whether the database is already at the newest migration (False when unsure)."""
    try:
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        return False
    return found == newest_revision()
