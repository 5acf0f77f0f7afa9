"""Writing to the Directory's revision store: commits, a section's derived index, the folder's tags.

A commit is one revision, all changes or none. It bumps the head first (taking the write lock on
both engines: SQLite's BEGIN IMMEDIATE, PostgreSQL's row lock), checks every precondition against
the locked head, then writes the documents, the changes, the head tree, the section tags and the
revision row. A failure before the final COMMIT rolls back and says so; a failure *during* COMMIT
is `IndeterminateCommit`, because nobody can say whether it landed.

The statements are plain SQL on the driver's own connection, whichever engine: a SQLite Ledger
already at the newest schema is written with the standard library alone (`storage.documents` hands
over a `sqlite3` connection), so the first change a `flightlog find` or `flightlog mcp` makes to the
Directory does not import SQLAlchemy for it (a quarter of a `find` after one row was edited,
bench.startup); PostgreSQL, and a SQLite file SQLAlchemy opened, lend their pool's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from storage.documents.model import (
    Change,
    Commit,
    DocumentStoreError,
    IndeterminateCommit,
    PreconditionFailed,
    Refusal,
    RevisionMismatch,
    chunks,
    is_concept,
    section_tag,
    sha256_text,
    snapshot_digest,
)
from storage.sqlite_setup import begin_immediate, sqlite_time

Connect = Callable[[], AbstractContextManager[Any]]
"""Lends a DB-API connection (sqlite3 or psycopg) for one transaction, taking it back after."""


class DocumentWrites:
    """The write path of one space, over connections `connect` lends. `errors` are the driver's
    error classes (translated into the store's errors here, at the boundary)."""

    def __init__(
        self, connect: Connect, sqlite: bool, space: str, errors: tuple[type[Exception], ...]
    ) -> None:
        self.connect = connect
        self.sqlite = sqlite
        self.space = space
        self.errors = errors
        self.m = "?" if sqlite else "%s"
        """The driver's parameter mark."""

    @contextmanager
    def _transaction(self, what: str, lost: Callable[[str], Exception] | None = None) -> Iterator[Any]:
        """A cursor in one write transaction, committed at the end. A driver error rolls it back and
        is raised as `DocumentStoreError` naming `what`; one from COMMIT itself as `lost(message)`
        when given (nobody can say whether it landed)."""
        with self._lent(what) as conn:
            try:
                yield self._begin(conn)
            except self.errors as e:
                _rollback(conn, self.errors)
                raise DocumentStoreError(f"{what}: {e}".splitlines()[0]) from e
            except BaseException:
                _rollback(conn, self.errors)
                raise
            try:
                _commit(conn)
            except self.errors as e:
                _rollback(conn, self.errors)
                if lost is None:
                    raise DocumentStoreError(f"{what}: {e}".splitlines()[0]) from e
                raise lost(str(e).splitlines()[0]) from e

    @contextmanager
    def _lent(self, what: str) -> Iterator[Any]:
        """A connection from `connect`; failing to get one is the store's error too."""
        with ExitStack() as stack:
            try:
                conn = stack.enter_context(self.connect())
            except self.errors as e:
                raise DocumentStoreError(f"{what}: {e}".splitlines()[0]) from e
            yield conn

    def _begin(self, conn: Any) -> Any:
        if self.sqlite:
            begin_immediate(conn)
        return conn.cursor()  # psycopg begins the transaction at the first statement

    # ---- the derived index and the folder's tags ---------------------------------------------

    def save_index(self, bundle: str, tag: str, data: bytes) -> None:
        """Keep the derived index of one section, built from the section at `tag`."""
        m = self.m
        with self._transaction("directory index") as cur:
            cur.execute(
                f"DELETE FROM directory_index WHERE space = {m} AND bundle = {m}", (self.space, bundle)
            )
            cur.execute(
                f"INSERT INTO directory_index (space, bundle, tag, data) VALUES ({m}, {m}, {m}, {m})",
                (self.space, bundle, tag, data),
            )

    def save_folder_tags(self, tags: dict[str, str]) -> None:
        """Remember the stat tags of the folder just synced."""
        m = self.m
        with self._transaction("directory store") as cur:
            cur.execute(f"DELETE FROM directory_folders WHERE space = {m}", (self.space,))
            if tags:
                cur.executemany(
                    f"INSERT INTO directory_folders (space, bundle, stat_tag) VALUES ({m}, {m}, {m})",
                    [(self.space, b, t) for b, t in sorted(tags.items())],
                )

    # ---- the commit --------------------------------------------------------------------------

    def commit(self, changes: Sequence[Change], *, expected: int | None = None, message: str = "") -> Commit:
        """Commit `changes` as one revision, all or nothing.

        Raises `RevisionMismatch` when `expected` is not the head, `PreconditionFailed` listing every
        refused change, `IndeterminateCommit` when COMMIT itself failed.
        """
        keys = [(c.bundle, c.path) for c in changes]
        if len(set(keys)) != len(keys):
            raise DocumentStoreError("two changes target the same document")
        done: list[Commit] = []

        def lost(said: str) -> Exception:
            return IndeterminateCommit(done[0].revision, said)

        with self._transaction("directory commit failed", lost) as cur:
            done.append(self._apply(cur, changes, expected, message))
        return done[0]

    def _apply(self, cur: Any, changes: Sequence[Change], expected: int | None, message: str) -> Commit:
        m, space = self.m, self.space
        head = self._lock_head(cur)
        if expected is not None and expected != head:
            raise RevisionMismatch(expected, head)
        current: dict[tuple[str, str], str] = {}
        for bundles in chunks(sorted({c.bundle for c in changes}), 200):
            marks = ", ".join(m for _ in bundles)
            cur.execute(
                f"SELECT bundle, path, sha256 FROM directory_tree WHERE space = {m} AND bundle IN ({marks})",
                (space, *bundles),
            )
            current.update({(b, p): h for b, p, h in cur.fetchall()})
        refusals = [r for c in changes if (r := _refusal(c, current.get((c.bundle, c.path))))]
        if refusals:
            raise PreconditionFailed(refusals)
        revision = head + 1
        written = deleted = 0
        new_docs: dict[str, str] = {}
        change_rows: list[tuple[str, str, str | None]] = []
        gone: list[tuple[str, str]] = []
        for c in changes:
            key = (c.bundle, c.path)
            if c.content is None:
                if key in current:
                    deleted += 1
                    del current[key]
                    change_rows.append((c.bundle, c.path, None))
                    gone.append(key)
                continue
            sha = sha256_text(c.content)
            if current.get(key) == sha:
                continue
            new_docs[sha] = c.content
            if key in current:
                gone.append(key)
            current[key] = sha
            written += 1
            change_rows.append((c.bundle, c.path, sha))
        self._replace_entries(cur, gone, [(b, p, h) for b, p, h in change_rows if h is not None])
        self._store_documents(cur, new_docs)
        if change_rows:
            cur.executemany(
                "INSERT INTO directory_changes (space, revision, bundle, path, sha256)"
                f" VALUES ({m}, {m}, {m}, {m}, {m})",
                [(space, revision, *row) for row in change_rows],
            )
        self._retag(cur, {b for b, _, _ in change_rows})
        cur.execute(f"SELECT bundle, tag, documents FROM directory_sections WHERE space = {m}", (space,))
        tags = cur.fetchall()
        snapshot = snapshot_digest((b, tag) for b, tag, _ in tags)
        documents = sum(n for b, _, n in tags if b)  # concepts: sections count theirs (`_retag`)
        now = datetime.now(UTC)
        cur.execute(
            "INSERT INTO directory_revisions (space, revision, parent, at, message, changes, documents,"
            f" snapshot) VALUES ({m}, {m}, {m}, {m}, {m}, {m}, {m}, {m})",
            (space, revision, head or None, sqlite_time(now) if self.sqlite else now, message,
             len(change_rows), documents, snapshot),
        )  # fmt: skip
        return Commit(revision, snapshot, documents, written, deleted)

    def _lock_head(self, cur: Any) -> int:
        """Advance the head by one (the write lock), returning the head before it."""
        m = self.m
        cur.execute(f"UPDATE directory_refs SET revision = revision + 1 WHERE space = {m}", (self.space,))
        if not cur.rowcount:
            cur.execute(f"INSERT INTO directory_refs (space, revision) VALUES ({m}, 1)", (self.space,))
            return 0
        cur.execute(f"SELECT revision FROM directory_refs WHERE space = {m}", (self.space,))
        return int(cur.fetchone()[0]) - 1

    def _replace_entries(
        self, cur: Any, gone: list[tuple[str, str]], added: list[tuple[str, str, str]]
    ) -> None:
        """Delete the tree entries `gone` names, then insert the `added` (bundle, path, sha256)
        entries into this space, each as one executemany.

        A change names each document once (`commit` refuses two for one path), so deleting every
        replaced or removed entry first and inserting after is the same as doing it change by change.
        One statement a change held SQLite's write lock for seconds while a 25k-row folder was first
        imported, and every proxy recording into the same Ledger waited that long to commit."""
        m, space = self.m, self.space
        if gone:
            cur.executemany(
                f"DELETE FROM directory_tree WHERE space = {m} AND bundle = {m} AND path = {m}",
                [(space, b, p) for b, p in gone],
            )
        if added:
            cur.executemany(
                f"INSERT INTO directory_tree (space, bundle, path, sha256) VALUES ({m}, {m}, {m}, {m})",
                [(space, *row) for row in added],
            )

    def _store_documents(self, cur: Any, docs: dict[str, str]) -> None:
        if not docs:
            return
        m = self.m
        present: set[str] = set()
        for chunk in chunks(sorted(docs), 500):
            marks = ", ".join(m for _ in chunk)
            cur.execute(f"SELECT sha256 FROM directory_documents WHERE sha256 IN ({marks})", chunk)
            present.update(sha for (sha,) in cur.fetchall())
        rows = [
            (sha, len(text.encode("utf-8")), text) for sha, text in sorted(docs.items()) if sha not in present
        ]
        if rows:
            cur.executemany(
                f"INSERT INTO directory_documents (sha256, size, content) VALUES ({m}, {m}, {m})", rows
            )

    def _retag(self, cur: Any, bundles: set[str]) -> None:
        m, space = self.m, self.space
        for bundle in sorted(bundles):
            cur.execute(
                f"SELECT path, sha256 FROM directory_tree WHERE space = {m} AND bundle = {m}", (space, bundle)
            )
            entries = cur.fetchall()
            cur.execute(f"DELETE FROM directory_sections WHERE space = {m} AND bundle = {m}", (space, bundle))
            if entries:
                cur.execute(
                    "INSERT INTO directory_sections (space, bundle, tag, documents)"
                    f" VALUES ({m}, {m}, {m}, {m})",
                    (
                        space,
                        bundle,
                        section_tag((p, h) for p, h in entries),
                        sum(1 for p, _ in entries if is_concept(bundle, p)),
                    ),
                )


def _commit(conn: Any) -> None:
    """COMMIT (DB-API's: sqlite3 commits the transaction BEGIN IMMEDIATE opened, psycopg its own)."""
    conn.commit()


def _rollback(conn: Any, errors: tuple[type[Exception], ...]) -> None:
    """Roll back what is open (nothing is a no-op); a connection already gone has nothing left."""
    with suppress(*errors):
        conn.rollback()


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
