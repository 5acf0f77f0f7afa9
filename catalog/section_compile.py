"""Compiling a section of the Directory's index from its documents, or from an earlier compile of it.

A section's compiled form (laid out by `catalog.index_format`, read by `catalog.index.SectionIndex`)
is a function of its documents alone: rows in path order, words sorted, however it was compiled. A
section whose documents mostly stayed as they were is recompiled from its previous form: each
unchanged row keeps its stored line and postings, and only the new or changed documents are read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from catalog.document import links, parse
from catalog.folder import unsafe_path
from catalog.index import GRAIN, INDEX_FORMAT, KIND, LINKS, NAME, NORM, PATH, STATUS, SUMMARY, SectionIndex
from catalog.index_format import (
    encode_row,
    frames,
    pack_json,
    pack_lines,
    pack_postings,
    pack_strings,
    row_key,
)
from catalog.words import normal, word_set

SUMMARY_MAX: Final = 120
_SPACE = re.compile(r"\s+")


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
    the next open, several times an everyday `flightlog find`; patched, it costs a fraction of one
    (bench.startup's find after one row of tool/ edited)."""
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
