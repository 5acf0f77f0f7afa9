"""Changes to the Directory: parsed, checked against the aliases, committed, refusals worded.

The wording of refusals is part of the agent API: a refusal that a retry with the current hash
fixes ends with the line `retry with replaces: "H"`; an indeterminate commit never does, because
a second write on top of a commit that did land is the lost update the precondition prevents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from catalog.aliases import ALIASES_PATH, Aliases, matching, name_matches, parse_aliases
from catalog.document import parse
from catalog.errors import BadAlias, BadPath, Indeterminate, Refused, RevisionConflict, StoreFailed
from catalog.folder import ROOT_BUNDLE, check_target
from catalog.index import Index
from storage.documents import (
    Change,
    Commit,
    DocumentStore,
    DocumentStoreError,
    IndeterminateCommit,
    PreconditionFailed,
    Refusal,
    RevisionMismatch,
    sha256_text,
)
from storage.escaped import needs_escape

MAX_CHANGES: Final = 1000
REASONS: Final = {
    "exists": "concept already exists: re-read the concept and retry with its new hash",
    "stale": "changed since it was read: re-read the concept and retry with its new hash",
    "missing": "concept does not exist",
    "needs-hash": "delete needs the concept's current hash: re-read the concept and retry with it",
}


def retry_line(sha: str) -> str:
    return f'retry with replaces: "{sha}"'


def parse_change(change: Mapping[str, Any]) -> Change:
    """One `{operation, bundle, path, content?, replaces?}` as a storage `Change`."""
    if not isinstance(change, Mapping):
        raise BadPath("refused: a change is an object {operation, bundle, path, content?, replaces?}")
    operation = change.get("operation", "write")
    bundle, path = change.get("bundle"), change.get("path")
    if not isinstance(bundle, str) or not isinstance(path, str):
        raise BadPath("refused: a change needs a bundle and a path (strings)")
    if needs_escape(bundle + path):  # first: the messages below quote the path as it is
        raise BadPath(f"refused: {bundle + '/' + path!a} holds a NUL or a lone surrogate, not text")
    check_target(bundle, path)
    replaces = change.get("replaces") or None
    if replaces is not None and not isinstance(replaces, str):
        raise BadPath(f"refused: {bundle}/{path}: replaces must be the 64-character hash")
    if operation == "write":
        content = change.get("content")
        if not isinstance(content, str):
            raise BadPath(f"refused: {bundle}/{path}: a write needs content (the whole document)")
        if needs_escape(content):  # neither store keeps it as text (PostgreSQL no NUL, UTF-8 no surrogate)
            raise BadPath(f"refused: {bundle}/{path}: the content holds a NUL or a lone surrogate, not text")
        return Change(bundle, path, content, replaces)
    if operation == "delete":
        return Change(bundle, path, None, replaces)
    raise BadPath(f'refused: unknown operation "{operation}" (write or delete)')


def parse_changes(changes: Sequence[Mapping[str, Any]]) -> list[Change]:
    """1 to 1,000 changes with no two aimed at the same document."""
    if not 1 <= len(changes) <= MAX_CHANGES:
        raise BadPath(f"refused: a transaction holds 1 to {MAX_CHANGES} changes, not {len(changes)}")
    parsed = [parse_change(c) for c in changes]
    seen: set[tuple[str, str]] = set()
    for c in parsed:
        if (c.bundle, c.path) in seen:
            raise BadPath(f"refused: {c.bundle}/{c.path} is changed twice in one transaction")
        seen.add((c.bundle, c.path))
    return parsed


def commit(
    store: DocumentStore,
    changes: Sequence[Change],
    expected: int | None,
    message: str,
    *,
    single: bool = False,
) -> Commit:
    """Commit through the store, translating its errors into the refusals of the agent API."""
    try:
        return store.commit(changes, expected=expected, message=message)
    except PreconditionFailed as e:
        raise _refused(e.refusals, single) from e
    except RevisionMismatch as e:
        raise RevisionConflict(
            f"refused: expected revision {e.expected}, but the head is revision {e.head}; "
            "nothing was committed",
            e.head,
        ) from e
    except IndeterminateCommit as e:
        raise Indeterminate(
            f"commit indeterminate: something failed after revision {e.revision} began replacing the head, "
            f"so it may or may not have landed; read history (revision {e.revision}) before writing again",
            e.revision,
        ) from e
    except DocumentStoreError as e:
        raise StoreFailed(str(e)) from e


def _refused(refusals: Sequence[Refusal], single: bool) -> Refused:
    lines = []
    for r in refusals:
        where = f"{r.bundle}/{r.path}" if r.bundle else r.path
        lines.append(f"refused: {where}: {REASONS[r.reason]}")
        if r.current is not None:
            lines.append(retry_line(r.current))
    if not single:
        lines.insert(0, f"nothing committed: {len(refusals)} precondition(s) failed")
    retry = refusals[0].current if len(refusals) == 1 else None
    return Refused("\n".join(lines), retry)


def hashes(changes: Sequence[Change]) -> dict[str, str | None]:
    """`bundle/path -> new hash` (None for a delete) of what was asked."""
    return {
        (f"{c.bundle}/{c.path}" if c.bundle else c.path): (
            sha256_text(c.content) if c.content is not None else None
        )
        for c in changes
    }


def check_aliases(changes: Sequence[Change], index: Index, aliases: Aliases) -> list[str]:
    """Refuse changes that would leave an alias naming no row; returns warnings for written rows."""
    warnings: list[str] = []
    added: list[str] = []
    removed: set[tuple[str, int]] = set()
    new_aliases = aliases
    for c in changes:
        if c.bundle == ROOT_BUNDLE and c.path == ALIASES_PATH:
            new_aliases = parse_aliases(c.content) if c.content is not None else {}
            continue
        found = index.locate(f"{c.bundle}/{c.path}")
        if found is not None and found[0] == c.bundle:
            removed.add(found)
        if c.content is not None:
            front, _, notes = parse(c.content)
            _callable_where_it_says(c, front)
            warnings.extend(f"{c.bundle}/{c.path}: {n}" for n in notes)
            added.append(str(front.get("name") or c.path.rsplit("/", 1)[-1].removesuffix(".md")))
    rewritten = new_aliases is not aliases
    for word, patterns in sorted(new_aliases.items()):
        for pattern in patterns:
            before = matching(pattern, index)
            if any(k not in removed for k in before):
                continue
            if not before and not rewritten:
                continue  # already a reported problem (`directory check`): not this change's doing
            if any(name_matches(pattern, name) for name in added):
                continue
            raise BadAlias(
                f'refused: alias "{word}" pattern "{pattern}" would name no row; '
                f"change {ALIASES_PATH} in the same transaction"
            )
    return warnings


TOOL_BUNDLE: Final = "tool"


def _callable_where_it_says(c: Change, front: Mapping[str, Any]) -> None:
    """A row that says it is a tool must be one: only rows of `tool/` are callable, so a `kind: tool`
    written elsewhere is refused with the reason, not accepted as a tool nothing can run."""
    kind = str(front.get("kind") or front.get("type") or "")
    if kind == TOOL_BUNDLE and c.bundle != TOOL_BUNDLE:
        raise BadPath(
            f"refused: {c.bundle}/{c.path} says kind: {kind}, but only rows in {TOOL_BUNDLE}/ are callable; "
            f"write it as {TOOL_BUNDLE}/{c.path.rsplit('/', 1)[-1]} or give it another kind"
        )


def restore_changes(store: DocumentStore, revision: int, head: int) -> list[Change]:
    """The changes that make the head's content equal `revision`'s."""
    if not 1 <= revision <= head:
        raise BadPath(f"refused: revision {revision} does not exist (the head is revision {head})")
    try:
        then = store.tree_at(revision)
        now = store.tree()
        texts = store.contents(h for k, h in then.items() if now.get(k) != h)
    except DocumentStoreError as e:
        raise StoreFailed(str(e)) from e
    out = [Change(b, p, texts[h], check=False) for (b, p), h in sorted(then.items()) if now.get((b, p)) != h]
    out.extend(Change(b, p, None, check=False) for (b, p) in sorted(now) if (b, p) not in then)
    return out
