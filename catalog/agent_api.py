"""The agent API of seed 002 over a Directory: few verbs, all deterministic, all text.

    manifest(bundle?, names?, offset?, limit?) -> TSV (the manifest module); paged like get
    search(query, k?, bundle?)             -> manifest rows + pos, score, layer, matched; never bodies
    get(ids, section?, offset?, limit?, find?) -> framed slices (the slices module)
    snapshot()                             -> digest, concepts, revision
    write(bundle, path, content, replaces?) / delete(bundle, path, replaces)
    transact(changes, expectedRevision?) / history(before?, limit?) / restore(revision, expectedRevision)
                                           (seed 002's argument names; the Python methods take snake_case)

Every verb answers one text or raises a `CatalogError` whose message is the whole answer (the MCP
server turns it into an `isError` result, the HTTP handler into a status). `TOOLS` holds the tool
definitions: their descriptions say when to call, and their size is measured by the benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from catalog import manifest as manifest_text
from catalog import slices
from catalog.changes import retry_line
from catalog.directory import Committed, Directory
from catalog.errors import (
    BadAlias,
    BadPath,
    CatalogError,
    Indeterminate,
    LocalCommandRefused,
    Refused,
    UnknownRow,
)
from catalog.resolver import no_match
from catalog.words import content_words, strip_framing, words

MCP_READ_CAP: Final = 15_000
SEARCH_K: Final = 8
HISTORY_LIMIT: Final = 20
SEARCH_COLUMNS: Final = ("pos", "score", "layer", "matched")
"""What search adds to the manifest columns: seed 002's pos, and the resolver's reason for the row
(seed 000: the score and the words that matched travel with every hit, on every door)."""


class AgentApi:
    """The verbs over one Directory. `cap` bounds reads without `limit` (None: unbounded)."""

    def __init__(self, directory: Directory, *, name: str | None = None, cap: int | None = None) -> None:
        self.directory = directory
        self.name = name or directory.name
        self.cap = cap
        self._manifests: dict[tuple[str, str | None, bool], str] = {}

    # ---- reads -------------------------------------------------------------------------------

    def manifest(
        self,
        bundle: str | None = None,
        names: bool = False,
        offset: int | None = None,
        limit: int | None = None,
    ) -> str:
        """The manifest; with a `cap` (over MCP) or a `limit`, one page of it framed
        `@@ manifest [start..end of total]` ending at a row's end, continued with `offset=end`."""
        text = self.whole_manifest(bundle, names)
        size = limit if limit is not None else self.cap
        if size is None and not offset:
            return text
        return slices.lines_page("manifest", text, offset, size)

    def whole_manifest(self, bundle: str | None = None, names: bool = False) -> str:
        """The whole manifest, never paged (the library's, the HTTP API's and the MCP resource's)."""
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
            "full": manifest_text.Size(len(self.whole_manifest().encode())),
            "names": manifest_text.Size(len(self.whole_manifest(names=True).encode())),
        }
        for b in self.directory.bundles():
            out[f"bundle:{b}"] = manifest_text.Size(len(self.whole_manifest(bundle=b).encode()))
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
        if not direct:  # said on every door (MCP, HTTP, the CLI's find), never an empty table alone
            out.append(f"# {no_match(query)}")
        out.append("\t".join((*manifest_text.COLUMNS, *SEARCH_COLUMNS)))
        for h in hits:
            at = slices.pos(texts.get(h.row.id, ""), qwords)
            out.append(
                f"{manifest_text.line(h.row)}\t{at}\t{h.score}\t{h.layer}\t{' '.join(h.matched) or '-'}"
            )
        out += [f"{manifest_text.line(r)}\t-\t-\tlinked\t-" for r in linked]
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
