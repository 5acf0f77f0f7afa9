"""Loading the Directory's index from its store: each section as cheaply as it can be had.

A section whose tag is unchanged keeps the form already loaded; one whose compile is stored under
its current tag is loaded as stored; one with an earlier compile (loaded, or stored under an older
tag of this format) is recompiled from it (`catalog.section_compile.recompile_section`); the rest
are compiled afresh, together (`catalog.compile_jobs`). Every compile is filed under the tag of
the documents it was made from. The alias table is read and checked against the index, and the
check's answer is stored so an unchanged Directory does not check again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from catalog.aliases import ALIASES_PATH, Aliases, alias_problems, read_aliases
from catalog.compile_jobs import Job, compile_all
from catalog.errors import StoreFailed
from catalog.folder import ROOT_BUNDLE
from catalog.index import INDEX_FORMAT, Index, SectionIndex
from catalog.section_compile import recompile_section
from storage.documents import DocumentStore, DocumentStoreError, section_tag
from storage.documents import snapshot_digest as _digest

_CHECKED: Final = b"aliases checked\n"
"""The stored marker of the last alias check (its problems follow as JSON), under the root bundle."""


def guarded(call: Any) -> Any:
    """`call()`, a store error translated into the Directory's `StoreFailed`."""
    try:
        return call()
    except DocumentStoreError as e:
        raise StoreFailed(str(e)) from e


@dataclass(frozen=True, slots=True)
class Loaded:
    """A loaded index with its aliases, and what loading it had to do and say."""

    index: Index
    aliases: Aliases
    problems: tuple[str, ...]
    """Every alias entry or pattern that names no row."""
    rebuilt: tuple[str, ...]
    """The sections that had to be compiled (afresh or from an earlier compile)."""
    warnings: tuple[str, ...]


def load_index(store: DocumentStore, tags: Mapping[str, str], previous: Index, cores: int) -> Loaded:
    """The index of the sections `tags` names (bundle -> section tag), reusing `previous` where a
    section did not change; `cores` processes may compile new sections (`catalog.compile_jobs`)."""
    sections: list[SectionIndex] = []
    rebuilt: list[str] = []
    warnings: list[str] = []
    wanted = {b: f"{t}:{INDEX_FORMAT}" for b, t in tags.items() if b != ROOT_BUNDLE}
    missing = [b for b, t in wanted.items() if (old := previous.sections.get(b)) is None or old.tag != t]
    if ROOT_BUNDLE in tags:
        missing.append(ROOT_BUNDLE)  # the marker of the last alias check
    stored = guarded(lambda: store.index_data(missing)) if missing else {}

    def texts(hashes: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = guarded(lambda: store.contents(hashes))
        return found

    fresh: list[Job] = []  # sections with no earlier compile: compiled together (compile_jobs)
    for bundle, tag in sorted(wanted.items()):
        old = previous.sections.get(bundle)
        if old is not None and old.tag == tag:
            sections.append(old)
            continue
        kept = stored.get(bundle)
        if kept is not None and kept[0] == tag:
            sections.append(SectionIndex(bundle, tag, kept[1]))
            continue
        base = old if old is not None else _compiled(bundle, kept)
        if base is None:
            fresh.append((bundle, guarded(lambda b=bundle: store.bundle_documents(b))))
            continue
        entries = [(p, h) for (_, p), h in guarded(lambda b=bundle: store.tree(b)).items()]
        data, notes = recompile_section(bundle, entries, texts, base)
        sections.append(_keep(store, bundle, entries, data))
        warnings.extend(notes)
        rebuilt.append(bundle)
    done, _ = compile_all(fresh, cores)
    for bundle, documents in fresh:
        data, notes = done[bundle]
        sections.append(_keep(store, bundle, [(p, h) for p, h, _ in documents], data))
        warnings.extend(notes)
        rebuilt.append(bundle)
    index = Index(sections)
    aliases: Aliases = {}
    problems: list[str] = []
    if ROOT_BUNDLE in tags:
        root = guarded(lambda: store.bundle_documents(ROOT_BUNDLE))
        aliases, problems = next((read_aliases(t) for p, _, t in root if p == ALIASES_PATH), ({}, []))
        checked = _digest(tags.items())
        kept = stored.get(ROOT_BUNDLE, ("", b""))
        if kept[0] == checked and kept[1].startswith(_CHECKED):
            problems = json.loads(kept[1].removeprefix(_CHECKED))
        else:
            problems += alias_problems(aliases, index)
            with contextlib.suppress(DocumentStoreError):
                store.save_index(ROOT_BUNDLE, checked, _CHECKED + json.dumps(problems).encode())
    return Loaded(index, aliases, tuple(problems), tuple(sorted(rebuilt)), tuple(warnings))


def _compiled(bundle: str, kept: tuple[str, bytes] | None) -> SectionIndex | None:
    """A stored compile of `bundle` in this format, whatever version of the section it was made
    from: the base `recompile_section` patches (None when there is none, or in an older format)."""
    if kept is None or not kept[0].endswith(f":{INDEX_FORMAT}"):
        return None
    return SectionIndex(bundle, kept[0], kept[1])


def _keep(store: DocumentStore, bundle: str, entries: Sequence[tuple[str, str]], data: bytes) -> SectionIndex:
    """A section compiled from `entries`, filed under the tag of those entries.

    The tag is derived from what was read, not taken from the tags read before: a commit in
    between would otherwise file the newer documents' index under the older tag, served
    again should that content ever come back (a restore)."""
    tag = f"{section_tag(entries)}:{INDEX_FORMAT}"
    with contextlib.suppress(DocumentStoreError):  # derived data: the next load rebuilds it
        store.save_index(bundle, tag, data)
    return SectionIndex(bundle, tag, data)
