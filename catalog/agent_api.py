"""The agent API of seed 002 over a Directory: few verbs, all deterministic, all text.

    manifest(bundle?, names?)              -> TSV (the manifest module)
    search(query, k?, bundle?)             -> manifest rows + pos for direct hits, never bodies
    get(ids, section?, offset?, limit?, find?) -> framed slices (the slices module)
    snapshot()                             -> digest, concepts, revision
    write(bundle, path, content, replaces?) / delete(bundle, path, replaces)
    transact(changes, expected_revision?) / history(before?, limit?) / restore(revision, expected_revision)

Every verb answers one text or raises a `CatalogError` whose message is the whole answer (the MCP
server turns it into an `isError` result, the HTTP handler into a status). `TOOLS` holds the tool
definitions: their descriptions say when to call, and their size is measured by the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from catalog import manifest as manifest_text
from catalog import slices
from catalog.authority import LocalCommandRefused
from catalog.changes import retry_line
from catalog.directory import Committed, Directory
from catalog.errors import BadAlias, BadPath, CatalogError, Indeterminate, Refused, UnknownRow
from catalog.words import content_words, strip_framing, words

MCP_READ_CAP: Final = 15_000
SEARCH_K: Final = 8
HISTORY_LIMIT: Final = 20


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One verb as an MCP tool: name, title, description, input schema and hints."""

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    destructive: bool = False
    idempotent: bool = True


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_STR: Final = {"type": "string"}
_INT: Final = {"type": "integer"}
READ_TOOLS: Final = (
    ToolSpec(
        "manifest",
        "Directory manifest",
        "Call this before anything else. The Directory as TSV: one line per row (id, bundle, kind, status, "
        "grain, summary, links). Pick ids from it; never guess one. bundle narrows it to one bundle; names "
        "lists ids only.",
        _obj([], bundle=_STR, names={"type": "boolean"}),
        read_only=True,
    ),
    ToolSpec(
        "search",
        "Search the Directory",
        "Rows matching words, a name or a question, best first, as manifest lines; never bodies. A direct "
        "hit ends with pos: pass it to get as offset to read the passage. Call when you know what you want "
        "but not its id.",
        _obj(["query"], query=_STR, k=_INT, bundle=_STR),
        read_only=True,
    ),
    ToolSpec(
        "get",
        "Read rows",
        "Read rows by id. Pass every id you need in one call. Each comes framed @@ id [start..end of "
        "total]; continue with offset. section reads one part (frontmatter, body, or a heading's slug); "
        "find returns a window around a literal phrase and every match offset. Reads stop at 15,000 "
        "characters unless limit says otherwise.",
        _obj(
            ["ids"],
            ids={"type": "array", "items": _STR},
            section=_STR,
            offset=_INT,
            limit=_INT,
            find=_STR,
        ),
        read_only=True,
    ),
    ToolSpec(
        "snapshot",
        "Directory snapshot",
        "The digest of the Directory's content, its row count and revision. Call to check whether a "
        "manifest you hold has changed.",
        _obj([]),
        read_only=True,
    ),
)
WRITE_TOOLS: Final = (
    ToolSpec(
        "write",
        "Write a row",
        "Write one Markdown document (YAML frontmatter with name and description, then the body) at "
        'bundle/path.md. Omit replaces to create. A refusal ends with retry with replaces: "H"; re-read '
        "the concept if it matters, then call again with that hash. An indeterminate commit offers no "
        "hash: check snapshot before writing again.",
        _obj(["bundle", "path", "content"], bundle=_STR, path=_STR, content=_STR, replaces=_STR),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "delete",
        "Delete a row",
        "Delete the document at bundle/path. replaces is its current hash; a refusal offers it, as with "
        "write.",
        _obj(["bundle", "path"], bundle=_STR, path=_STR, replaces=_STR),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)
DATABASE_TOOLS: Final = (
    ToolSpec(
        "transact",
        "Commit several changes",
        "Commit 1 to 1,000 changes as one revision. No changes commit if any precondition fails. A change "
        "is {operation: write|delete, bundle, path, content?, replaces?}; hashes are full 64-character "
        "digests. expected_revision refuses the commit if the head has moved.",
        _obj(
            ["changes"],
            changes={"type": "array", "items": {"type": "object"}, "minItems": 1, "maxItems": 1000},
            expected_revision=_INT,
        ),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "history",
        "Revision history",
        "Committed revisions, newest first. Pass the next cursor of one page as before to read on.",
        _obj([], before=_STR, limit=_INT),
        read_only=True,
    ),
    ToolSpec(
        "restore",
        "Restore a revision",
        "Make a new revision whose content equals an older revision's; history is never rewritten. "
        "expected_revision must be the current head.",
        _obj(["revision", "expected_revision"], revision=_INT, expected_revision=_INT),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)


CALL_TOOL: Final = ToolSpec(
    "call",
    "Run a tool",
    "Run one Directory tool: {tool: NAME, args: {...}} as its row's args schema says (read it with get "
    "first). flightlog holds the keys, checks the limits and records the call; the answer is "
    "{ok, result, action_id}.",
    _obj(["tool"], tool=_STR, args={"type": "object"}, token=_STR),
    read_only=False,
    destructive=True,
    idempotent=False,
)
"""Served only when the server is given a dispatcher (`flightlog mcp` wires the door)."""


def tools(database_tools: bool = False, call: bool = False) -> tuple[ToolSpec, ...]:
    """The tools in their fixed order: the six defaults, `call` when dispatching, then the three
    database tools if asked."""
    return (
        READ_TOOLS + WRITE_TOOLS + ((CALL_TOOL,) if call else ()) + (DATABASE_TOOLS if database_tools else ())
    )


class AgentApi:
    """The verbs over one Directory. `cap` bounds reads without `limit` (None: unbounded)."""

    def __init__(self, directory: Directory, *, name: str | None = None, cap: int | None = None) -> None:
        self.directory = directory
        self.name = name or directory.name
        self.cap = cap
        self._manifests: dict[tuple[str, str | None, bool], str] = {}

    # ---- reads -------------------------------------------------------------------------------

    def manifest(self, bundle: str | None = None, names: bool = False) -> str:
        snap = self.directory.snapshot()
        key = (snap.digest, bundle or None, bool(names))
        text = self._manifests.get(key)
        if text is None:
            if len(self._manifests) > 64:
                self._manifests.clear()
            text = manifest_text.render(
                self.name,
                self.directory.bundles(),
                snap.digest,
                self.directory.rows(),
                bundle=bundle or None,
                names=bool(names),
            )
            self._manifests[key] = text
        return text

    def sizes(self) -> dict[str, manifest_text.Size]:
        """Measured sizes of the full manifest, the names-only one, and each bundle's."""
        out = {
            "full": manifest_text.Size(len(self.manifest().encode())),
            "names": manifest_text.Size(len(self.manifest(names=True).encode())),
        }
        for b in self.directory.bundles():
            out[f"bundle:{b}"] = manifest_text.Size(len(self.manifest(bundle=b).encode()))
        return out

    def advice(self) -> str:
        """The manifest tool's advice, from the size the index measured (no manifest rendered)."""
        return manifest_text.advice(manifest_text.Size(self.directory.index.manifest_bytes))

    def search(self, query: str, k: int | None = None, bundle: str | None = None) -> str:
        k = SEARCH_K if k is None else max(1, min(int(k), 100))
        snap = self.directory.snapshot()
        bundles = self.directory.bundles()
        if bundle and bundle not in bundles:
            manifest_text.render(self.name, bundles, snap.digest, [], bundle=bundle)  # raises UnknownBundle
        hits = self.directory.find(query, k=k, bundle=bundle or None)
        direct = [h.row for h in hits]
        texts = self.directory.texts(direct)
        qwords = content_words(words(strip_framing(query)))
        seen = {r.id for r in direct}
        inbound: dict[str, int] = {}
        for r in direct:
            for link in r.links:
                if link not in seen:
                    inbound[link] = inbound.get(link, 0) + 1
        linked = []
        for link_id in sorted(inbound, key=lambda x: (-inbound[x], x))[:k]:
            try:
                linked.append(self.directory.row(link_id))
            except UnknownRow:
                continue
        out = manifest_text.preamble(self.name, bundles, snap.digest)
        out += [f"# query: {' '.join(query.split())}", f"# hits: {len(direct)} direct, {len(linked)} linked"]
        out.append("\t".join((*manifest_text.COLUMNS, "pos")))
        out += [f"{manifest_text.line(r)}\t{slices.pos(texts.get(r.id, ''), qwords)}" for r in direct]
        out += [f"{manifest_text.line(r)}\t-" for r in linked]
        return "\n".join(out) + "\n"

    def get(
        self,
        ids: Sequence[str] | str,
        section: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
        find: str | None = None,
    ) -> str:
        if isinstance(ids, str):
            ids = [x for x in ids.replace(",", " ").split() if x]
        how = slices.Slice(section or None, offset, limit, find or None, self.cap)
        rows: dict[str, Any] = {}
        for key in dict.fromkeys(ids):
            try:
                rows[key] = self.directory.row(key)
            except UnknownRow:
                rows[key] = None
        texts = self.directory.texts([r for r in rows.values() if r is not None])
        chunks: list[str] = []
        missing: list[str] = []
        for key, row in rows.items():
            text = texts.get(row.id) if row is not None else None
            if row is None or text is None:
                missing.append(key)
                continue
            label = row.id
            if how.section:
                part = slices.section_text(text, how.section)
                if part is None:
                    missing.append(f"{row.id}#{how.section}")
                    continue
                text, label = part, f"{row.id}#{how.section}"
            chunks.append(slices.cut(label, text, how))
        return slices.join(chunks, missing)

    def snapshot(self) -> str:
        snap = self.directory.snapshot()
        return f"snapshot {snap.digest}, {snap.concepts} concepts, revision {snap.revision}"

    # ---- writes ------------------------------------------------------------------------------

    def write(self, bundle: str, path: str, content: str, replaces: str | None = None) -> str:
        try:
            done = self.directory.write(bundle, path, content, replaces or None)
        except CatalogError as e:
            raise self._with_retry(e, bundle, path) from e
        return _committed(f"wrote {bundle}/{path} (hash {done.hashes[f'{bundle}/{path}']})", done)

    def delete(self, bundle: str, path: str, replaces: str | None = None) -> str:
        try:
            done = self.directory.delete(bundle, path, replaces or None)
        except CatalogError as e:
            raise self._with_retry(e, bundle, path) from e
        return _committed(f"deleted {bundle}/{path}", done)

    def _with_retry(self, error: CatalogError, bundle: str, path: str) -> CatalogError:
        """Any failure of a write carries the hash to retry with, except those a retry cannot fix."""
        if isinstance(
            error, Indeterminate | BadPath | BadAlias | LocalCommandRefused
        ) or "retry with replaces" in str(error):
            return error
        try:
            current = self.directory.current_hash(bundle, path)
        except CatalogError:
            return error
        if current is None:
            return error
        return Refused(f"{error}\n{retry_line(current)}", current)

    def transact(self, changes: Sequence[Mapping[str, Any]], expected_revision: int | None = None) -> str:
        done = self.directory.transact(changes, expected_revision)
        return _committed(
            f"committed revision {done.revision}: {done.written} written, {done.deleted} deleted", done
        )

    def history(self, before: str | int | None = None, limit: int | None = None) -> str:
        limit = HISTORY_LIMIT if limit is None else max(1, min(int(limit), 100))
        cursor = _cursor(before)
        page = self.directory.history(before=cursor, limit=limit + 1)
        lines = ["revision\tparent\tat\tchanges\tconcepts\tsnapshot\tmessage"]
        for r in page[:limit]:
            lines.append(
                f"{r.revision}\t{r.parent or '-'}\t{r.at.isoformat()}\t{r.changes}\t{r.documents}\t"
                f"{r.snapshot}\t{manifest_text.cell(r.message)}"
            )
        if len(page) > limit:
            lines.append(f"# next: r{page[limit - 1].revision}")
        return "\n".join(lines) + "\n"

    def restore(self, revision: int, expected_revision: int) -> str:
        done = self.directory.restore(int(revision), int(expected_revision))
        return _committed(f"restored revision {revision} as revision {done.revision}", done)


def _cursor(before: str | int | None) -> int | None:
    if before is None or before == "":
        return None
    text = str(before).removeprefix("r")
    if not text.isdigit():
        raise BadPath(f'refused: "{before}" is not a history cursor (use the "# next:" value of a page)')
    return int(text)


def _committed(head: str, done: Committed) -> str:
    lines = [f"{head}, snapshot {done.snapshot}, {done.concepts} concepts"]
    lines += [f"warning: {w}" for w in done.warnings]
    return "\n".join(lines)
