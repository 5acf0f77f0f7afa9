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

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from catalog.index_format import (
    Postings,
    RowLines,
    split_frames,
    unpack_json,
    unpack_strings,
)
from catalog.words import forms

INDEX_FORMAT: Final = "v9"
"""Part of every stored index tag, so a change of this format rebuilds every section once (v8: words
stored sorted, rows in code point order of their paths: a section's data is a function of its
documents, however it was compiled; v9: no row for a stored path with a control character,
`listed`)."""

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
