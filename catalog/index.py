"""The derived index: what listing, resolving and opening rows read instead of the documents.

One compiled index per section (bundle), built from that section's documents only and stored with
the section's version tag; a section is recompiled only when its tag changes. Loading is one read
of every section's compiled form: no document is parsed to list the Directory or resolve a name.

A compiled section (laid out by `catalog.index_format`) holds its rows as short lists, their names
and the orders prefix matches and ties use, and postings from each word to the rows whose name (or
text) holds it; each part is decoded on its first use, so opening the Directory to answer one query
decodes the names and postings it looks at and the rows it returns, never the whole section.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from catalog.document import links, parse
from catalog.folder import unsafe_path
from catalog.index_format import (
    Postings,
    RowLines,
    encode_row,
    frames,
    pack_json,
    pack_lines,
    pack_postings,
    pack_strings,
    row_key,
    split_frames,
    unpack_json,
    unpack_strings,
)
from catalog.words import forms, normal, word_set

INDEX_FORMAT: Final = "v9"
"""Part of every stored index tag, so a change of this format rebuilds every section once (v8: words
stored sorted, rows in code point order of their paths: a section's data is a function of its
documents, however it was compiled; v9: no row for a stored path with a control character,
`listed`)."""
SUMMARY_MAX: Final = 120
_SPACE = re.compile(r"\s+")

# positions in a compiled row
PATH, HASH, NAME, NORM, KIND, STATUS, GRAIN, SUMMARY, LINKS, CHARS = range(10)


@dataclass(frozen=True, slots=True)
class Row:
    """One row as the manifest lists it."""

    id: str
    bundle: str
    path: str
    name: str
    kind: str
    status: str
    grain: str
    summary: str
    links: tuple[str, ...]
    hash: str
    chars: int


def summarize(description: str) -> str:
    """Whitespace collapsed, cut at 120 characters with `…`."""
    text = _SPACE.sub(" ", description).strip()
    return text if len(text) <= SUMMARY_MAX else text[: SUMMARY_MAX - 1].rstrip() + "…"


Analysed = tuple[list[Any], Iterable[str], Iterable[str], list[str]]
"""One document as its section's index holds it: the compiled row, the words of its name, every
word of the row (name, path and text, each once), and what parsing it had to say."""


def analyse(bundle: str, path: str, sha: str, text: str) -> Analysed:
    """What one document contributes to its section's index: a function of `bundle`, `path` and
    the text alone (no other document is read), so a row whose path and hash are unchanged can be
    taken from a previous compile as it was (`recompile_section`)."""
    front, body, notes = parse(text)
    warnings = [f"{bundle}/{path}: {n}" for n in notes]
    stem = path.removesuffix(".md")
    name = str(front.get("name") or stem.rsplit("/", 1)[-1])
    kind = str(front.get("kind") or front.get("type") or _singular(bundle))
    if kind == "tool" and bundle != "tool":
        warnings.append(f"{bundle}/{path}: kind: tool outside tool/ is not callable (move it to tool/)")
    row = [
        path,
        sha,
        name,
        normal(name),
        kind,
        str(front.get("status") or "-"),
        str(front.get("grain") or "-"),
        summarize(str(front.get("description") or "")),
        links(front, body),
        len(text),
    ]
    own = word_set(name)
    every = own | word_set(stem) | word_set(text)  # however long: search -> pos -> get needs them all
    return row, own, every, warnings


def compile_section(bundle: str, documents: Sequence[tuple[str, str, str]]) -> tuple[bytes, list[str]]:
    """Compile one section's `(path, hash, text)` documents; returns the data and its warnings.

    Rows are in path order (code point order, as Python sorts: never the database's collation, which
    on PostgreSQL may be a locale's), and the data is a function of the documents alone."""
    rows: list[list[Any]] = []
    name_words: dict[str, list[int]] = {}
    text_words: dict[str, list[int]] = {}
    warnings: list[str] = []
    for path, sha, text in sorted(documents):
        if not listed(bundle, path, warnings):
            continue
        row, own, every, notes = analyse(bundle, path, sha, text)
        warnings.extend(notes)
        _post(len(rows), own, name_words)
        _post(len(rows), every, text_words)
        rows.append(row)
    section = _Rows(
        lines=[encode_row(r) for r in rows],
        stems=[r[PATH][:-3] for r in rows],
        names=[r[NAME] for r in rows],
        normals=[r[NORM] for r in rows],
        manifest_bytes=sum(_line_bytes(r, bundle) for r in rows),
    )
    return _pack(bundle, section, *_packed(name_words, text_words)), warnings


def listed(bundle: str, path: str, warnings: list[str]) -> bool:
    """Whether a stored document is a row: a `.md` path without a control character.

    The door and folder reads refuse such paths (`catalog.folder.check_target`), but a Directory
    stored before they did may hold one, and a row's id is its path, written into the manifest's
    tab-separated lines: `x<newline>forged<tab>...` showed every agent a row that does not exist.
    Such a document gets no row, and a warning saying so (it can still be read and deleted)."""
    if not path.endswith(".md"):
        return False
    if unsafe_path(path):
        warnings.append(
            f"{bundle + '/' + path!a} is not listed: its path holds a tab, a line break or another"
            " control character (stored before flightlog refused them; delete it or write it anew)"
        )
        return False
    return True


RECOMPILE_SHARE: Final = 0.5
"""Above this share of a section's documents new or changed, `recompile_section` compiles the
section afresh: patching the previous postings costs more than it saves."""


def recompile_section(
    bundle: str,
    entries: Sequence[tuple[str, str]],
    texts: Callable[[Sequence[str]], Mapping[str, str]],
    previous: SectionIndex,
) -> tuple[bytes, list[str]]:
    """Compile a section of `(path, hash)` entries from `previous`, a compiled form of an earlier
    version of it: a document whose path and hash are unchanged keeps its row (its stored line,
    never decoded) and its postings, and only the others are fetched (`texts`: hash -> text) and
    analysed. The data equals what `compile_section` makes of the same documents, byte for byte;
    the warnings are those of the documents analysed (the others' were said when they were compiled)
    and of those not `listed`.

    Editing one row of a large section recompiled every document of it (parse, cut into words) at
    the next open: ~2.3 s of a `flightlog find` for a tool section of 8,500 rows, against ~0.3 s
    for its everyday open; patched, the section costs ~0.1 s."""
    skipped: list[str] = []
    paths = sorted((p, h) for p, h in entries if listed(bundle, p, skipped))

    def afresh() -> tuple[bytes, list[str]]:
        found = texts([h for _, h in paths])
        data, notes = compile_section(bundle, [(p, h, found[h]) for p, h in paths])
        return data, skipped + notes

    old = previous.rows
    try:
        kept = {row_key(old.line(j)): j for j in range(len(previous.stems))}
    except ValueError:  # not what this format writes: nothing of it is trusted
        return afresh()
    remap = [-1] * len(previous.stems)
    fresh: list[int] = []
    last = -1
    for i, key in enumerate(paths):
        was = kept.get(key)
        if was is None or was < last:  # new or changed (or out of order: a row not in path order)
            fresh.append(i)
            continue
        remap[was], last = i, was
    if len(fresh) > RECOMPILE_SHARE * max(len(paths), 1):
        return afresh()
    found = texts([paths[i][1] for i in fresh])
    n = len(paths)
    section = _Rows([b""] * n, [""] * n, [""] * n, [""] * n, previous.manifest_bytes)
    for j, i in enumerate(remap):
        if i < 0:  # a row gone (or changed): its manifest line goes too
            section.manifest_bytes -= _line_bytes(old[j], bundle)
            continue
        section.lines[i], section.stems[i] = old.line(j), previous.stems[j]
        section.names[i], section.normals[i] = previous.names[j], previous.normals[j]
    warnings = skipped
    analysed: list[tuple[int, Iterable[str], Iterable[str]]] = []
    for i in fresh:
        path, sha = paths[i]
        row, own, every, notes = analyse(bundle, path, sha, found[sha])
        warnings.extend(notes)
        section.lines[i], section.stems[i] = encode_row(row), row[PATH][:-3]
        section.names[i], section.normals[i] = row[NAME], row[NORM]
        section.manifest_bytes += _line_bytes(row, bundle)
        analysed.append((i, own, every))
    name_words = _remapped(previous.name_words, remap)
    text_words = _remapped(previous.text_words, remap)
    touched: set[str] = set()
    for i, own, every in analysed:
        _post(i, own, name_words)
        _post(i, every, text_words)
        touched.update(every)
    for w in touched:  # a fresh row's number may fall inside a list kept in order
        for postings in (name_words, text_words):
            if w in postings:
                postings[w].sort()
    return _pack(bundle, section, *_packed(name_words, text_words)), warnings


@dataclass(slots=True)
class _Rows:
    """A section's rows as its compiled form stores them, in path order."""

    lines: list[bytes]
    stems: list[str]
    names: list[str]
    normals: list[str]
    manifest_bytes: int


def _post(i: int, ws: Iterable[str], postings: dict[str, list[int]]) -> None:
    for w in ws:
        rows = postings.get(w)
        if rows is None:
            postings[w] = [i]
        else:
            rows.append(i)  # not setdefault: it would make an empty list for every word it finds


def _remapped(old: Mapping[str, Sequence[int]], remap: Sequence[int]) -> dict[str, list[int]]:
    """Each word's kept rows under their new numbers (`remap`: old -> new, -1 for a row gone);
    a word no kept row holds is dropped. `remap` keeps order, so every list stays sorted."""
    get = remap.__getitem__
    out: dict[str, list[int]] = {}
    for w in old:
        rows = [k for k in map(get, old[w]) if k >= 0]
        if rows:
            out[w] = rows
    return out


def _pack(bundle: str, rows: _Rows, name_postings: bytes, text_postings: bytes) -> bytes:
    """The compiled form of a section's rows and its packed postings (`pack_postings` of the words
    sorted: the data depends on which documents there are, not on the order they were analysed
    in, so a recompiled section equals a fresh compile of it)."""
    head = {"format": INDEX_FORMAT, "bundle": bundle, "manifest_bytes": rows.manifest_bytes}
    names, normals, count = rows.names, rows.normals, range(len(rows.names))
    orders = {
        "names": names,
        "normals": normals,
        "by_norm": sorted(count, key=lambda i: (normals[i], names[i])),
        "by_lower": sorted(count, key=lambda i: names[i].lower()),
        "by_rank": sorted(count, key=lambda i: (len(names[i]), names[i])),
    }
    parts = (
        pack_json(head),
        pack_strings(rows.stems),
        pack_json(orders),
        name_postings,
        pack_lines(rows.lines),
    )
    return frames(*parts, text_postings)


def _packed(name_words: Mapping[str, list[int]], text_words: Mapping[str, list[int]]) -> tuple[bytes, bytes]:
    """The name and text postings packed, each with its words sorted."""
    return pack_postings(_sorted(name_words)), pack_postings(_sorted(text_words))


def _sorted(postings: Mapping[str, list[int]]) -> dict[str, list[int]]:
    return {w: postings[w] for w in sorted(postings)}


def _line_bytes(r: list[Any], bundle: str) -> int:
    """A row's manifest line size, estimated at compile time (links counted as written)."""
    cells = (r[PATH][:-3], bundle, r[KIND], r[STATUS], r[GRAIN], r[SUMMARY], " ".join(r[LINKS]) or "-")
    return len("\t".join(cells).encode()) + 1


def _singular(bundle: str) -> str:
    return bundle[:-1] if bundle.endswith("s") and len(bundle) > 3 else bundle or "document"


class SectionIndex:
    """One loaded section: its rows and the lookups the resolver needs (built on first use)."""

    def __init__(self, bundle: str, tag: str, data: bytes) -> None:
        head, stems, self._names_frame, self._name_frame, self._rows_frame, self._text_frame = split_frames(
            data
        )
        loaded = unpack_json(head)
        self.bundle = bundle
        self.tag = tag
        self.stems: list[str] = unpack_strings(stems)
        self.manifest_bytes: int = loaded["manifest_bytes"]
        self._text_sets: dict[str, frozenset[int]] = {}
        self._folded_sets: dict[str, frozenset[int]] = {}

    @cached_property
    def _name_lists(self) -> dict[str, list[Any]]:
        names: dict[str, list[Any]] = unpack_json(self._names_frame)
        self._names_frame = b""
        return names

    @cached_property
    def rows(self) -> RowLines:
        """The compiled rows (each decoded on its first read)."""
        rows = RowLines(self._rows_frame, len(self.stems))
        self._rows_frame = b""
        return rows

    @property
    def names(self) -> list[str]:
        """Each row's name, by row number."""
        return self._name_lists["names"]

    @property
    def normals(self) -> list[str]:
        """Each row's normalized name (its words, space-separated), by row number."""
        return self._name_lists["normals"]

    @property
    def by_norm(self) -> list[int]:
        return self._name_lists["by_norm"]

    @property
    def by_lower(self) -> list[int]:
        return self._name_lists["by_lower"]

    @property
    def by_rank(self) -> list[int]:
        """Row numbers in the resolver's tie order: shorter names first, then by name."""
        return self._name_lists["by_rank"]

    @cached_property
    def name_words(self) -> Postings:
        """Each word of the rows' names to the rows holding it (decoded on first use)."""
        words = Postings(self._name_frame)
        self._name_frame = b""
        return words

    @cached_property
    def stem_numbers(self) -> dict[str, int]:
        """Each stem (path without `.md`) to its row number."""
        return dict(zip(self.stems, range(len(self.stems)), strict=True))

    @cached_property
    def spelled_words(self) -> list[str]:
        """The name words that can be misspelled (those with a letter): the typo layer's vocabulary."""
        return [w for w in self.name_words if not w.isdigit()]

    @cached_property
    def text_words(self) -> Postings:
        """Each word of the rows' whole text to the rows holding it (decoded on first use)."""
        words = Postings(self._text_frame)
        self._text_frame = b""
        return words

    def named_rows(self, lower: str) -> list[int]:
        """Rows whose lowercase name is `lower`, in row order (a bisect in the sorted names: no
        table of every name is built to answer one query)."""
        return sorted(_equal(self._lower_keys, self.by_lower, lower))

    def normed_rows(self, norm: str) -> list[int]:
        """Rows whose normalized name is `norm`, in row order."""
        return sorted(_equal(self._norm_keys, self.by_norm, norm))

    @cached_property
    def _norm_keys(self) -> list[str]:
        normals = self.normals
        return [normals[i] for i in self.by_norm]

    @cached_property
    def _lower_keys(self) -> list[str]:
        names = self.names
        return [names[i].lower() for i in self.by_lower]

    def norm_prefixed(self, prefix: str) -> list[int]:
        """Rows whose normalized name starts with `prefix`."""
        return _prefixed(self._norm_keys, self.by_norm, prefix)

    def lower_prefixed(self, prefix: str) -> list[int]:
        """Rows whose lowercase name starts with `prefix`."""
        return _prefixed(self._lower_keys, self.by_lower, prefix)

    def text_set(self, word: str) -> frozenset[int]:
        """The rows whose text holds `word`, as a set (made on first use of each word)."""
        found = self._text_sets.get(word)
        if found is None:
            found = frozenset(self.text_words.get(word, ()))
            self._text_sets[word] = found
        return found

    def folded_set(self, word: str) -> frozenset[int]:
        """The rows whose text holds `word` or a form that folds with it (plurals, -ing, -ed)."""
        found = self._folded_sets.get(word)
        if found is None:
            found = frozenset().union(*(self.text_set(f) for f in forms(word)))
            self._folded_sets[word] = found
        return found


def _equal(keys: list[str], order: list[int], key: str) -> list[int]:
    out: list[int] = []
    at = bisect_left(keys, key)
    while at < len(keys) and keys[at] == key:
        out.append(order[at])
        at += 1
    return out


def _prefixed(keys: list[str], order: list[int], prefix: str) -> list[int]:
    out: list[int] = []
    at = bisect_left(keys, prefix)
    while at < len(keys) and keys[at].startswith(prefix):
        out.append(order[at])
        at += 1
    return out


class Index:
    """Every loaded section, the ids they give their rows, and lookups by id or name."""

    def __init__(self, sections: Iterable[SectionIndex]) -> None:
        self.sections: dict[str, SectionIndex] = {
            s.bundle: s for s in sorted(sections, key=lambda s: s.bundle)
        }
        seen: set[str] = set()
        self.collisions: set[str] = set()
        """Stems more than one bundle holds (their ids carry the bundle)."""
        for s in self.sections.values():  # set operations, not a count per stem: loading runs this
            stems = set(s.stems)
            self.collisions |= seen & stems
            seen |= stems
        self._rows: dict[str, list[Row]] = {}
        self._one: dict[tuple[str, int], Row] = {}

    def __len__(self) -> int:
        return sum(len(s.stems) for s in self.sections.values())

    @property
    def manifest_bytes(self) -> int:
        """The manifest's size estimated from the compiled sections (no row is decoded)."""
        return sum(s.manifest_bytes for s in self.sections.values())

    def id_of(self, bundle: str, i: int) -> str:
        stem = self.sections[bundle].stems[i]
        return f"{bundle}/{stem}" if stem in self.collisions else stem

    def _by_id(self, key: str) -> tuple[str, int] | None:
        """The row whose id is `key`: a `bundle/stem`, or a stem no other bundle holds. Where two
        readings meet (a stem that itself starts with a bundle's name) the later section's row, and
        within it the later row, is the one meant, as when one table of every id held them all."""
        best: tuple[int, int, int, str] | None = None
        bare = key not in self.collisions
        for order, (bundle, s) in enumerate(self.sections.items()):
            numbers = s.stem_numbers
            if key.startswith(bundle + "/") and (i := numbers.get(key[len(bundle) + 1 :])) is not None:
                best = max(best or (order, i, 0, bundle), (order, i, 0, bundle))
            if bare and (j := numbers.get(key)) is not None:
                best = max(best or (order, j, 1, bundle), (order, j, 1, bundle))
        return (best[3], best[1]) if best is not None else None

    def _named(self, lower: str) -> list[tuple[str, int]]:
        return [(bundle, i) for bundle, s in self.sections.items() for i in s.named_rows(lower)]

    def locate(self, key: str) -> tuple[str, int] | None:
        """A row by id, `bundle/path` (with or without `.md`), or its name (case-insensitive)."""
        key = key.strip().removesuffix(".md")
        found = self._by_id(key)
        if found:
            return found
        named = self._named(key.lower())
        return named[0] if len(named) == 1 else None

    def named(self, name: str) -> list[tuple[str, int]]:
        """Every row whose name is `name` (case-insensitive)."""
        return self._named(name.lower())

    def row(self, bundle: str, i: int) -> Row:
        """One row, built alone (a query's hits never build their whole section)."""
        cached = self._rows.get(bundle)
        if cached is not None:
            return cached[i]
        row = self._one.get((bundle, i))
        if row is None:
            row = self._one[(bundle, i)] = self._build(bundle, i)
        return row

    def rows(self, bundle: str | None = None) -> list[Row]:
        """Rows in manifest order: bundles sorted, rows in path order within each."""
        if bundle is None:
            return [r for b in self.sections for r in self.rows(b)]
        cached = self._rows.get(bundle)
        if cached is None:
            n = len(self.sections[bundle].stems)
            cached = [self._one.get((bundle, i)) or self._build(bundle, i) for i in range(n)]
            self._rows[bundle] = cached
        return cached

    def _build(self, bundle: str, i: int) -> Row:
        r = self.sections[bundle].rows[i]
        return Row(
            id=self.id_of(bundle, i),
            bundle=bundle,
            path=r[PATH],
            name=r[NAME],
            kind=r[KIND],
            status=r[STATUS],
            grain=r[GRAIN],
            summary=r[SUMMARY],
            links=tuple(self._link_ids(r[LINKS])),
            hash=r[HASH],
            chars=r[CHARS],
        )

    def _link_ids(self, targets: list[str]) -> list[str]:
        out = []
        for target in targets:
            found = self.locate(target)
            if found:
                out.append(self.id_of(*found))
        return list(dict.fromkeys(out))
