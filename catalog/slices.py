"""`get`: bounded slices of rows, each framed so a model knows where it is and how to go on.

    @@ a                                   a whole read
    @@ b [0..4 of 10]                      a partial read: continue with offset 4
    @@ c#usage                             one section, whole (offsets are relative to it)
    @@ d [880..2880 of 9000] 3 matches at 980 1500 8000     a `find` window
    @@ e no match in 9000 chars
    @@ missing                             ids (or sections) not found, one per line

A slice is `[offset, min(total, offset + limit))` in characters (never splitting one); a negative
offset is 0; past the end is empty at `total`. `find` is a literal, case-insensitive phrase: the
window (2,000 characters, or `limit`) is centred on its first occurrence and the frame lists the
offset of every occurrence (the first 20 when there are more).

`lines_page` cuts a line-oriented text (the manifest) the same way, except that a page ends at a
line's end so no row is ever split: `@@ manifest [0..14987 of 3212345]`, continued with offset 14987.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from catalog.document import sections

FIND_WINDOW: Final = 2000
MATCHES_LISTED: Final = 20


@dataclass(frozen=True, slots=True)
class Slice:
    """What to cut from each concept; `cap` is the default limit (the MCP layer's 15,000)."""

    section: str | None = None
    offset: int | None = None
    limit: int | None = None
    find: str | None = None
    cap: int | None = None


def section_text(text: str, name: str) -> str | None:
    """One section of a document, or None when it has no section of that name."""
    for s in sections(text):
        if s.slug == name:
            return text[s.start : s.end]
    return None


def cut(label: str, text: str, how: Slice) -> str:
    """One concept's framed chunk."""
    total = len(text)
    if how.find:
        return _find(label, text, how.find, how.limit or FIND_WINDOW)
    start = min(max(0, how.offset or 0), total)
    limit = how.limit if how.limit is not None else how.cap
    end = total if limit is None else min(total, start + max(0, limit))
    if start == 0 and end == total:
        return f"@@ {label}\n{text}"
    return f"@@ {label} [{start}..{end} of {total}]\n{text[start:end]}"


def matches(text: str, phrase: str) -> list[int]:
    """Offsets of every non-overlapping, case-insensitive occurrence of `phrase`."""
    hay, needle = text.lower(), phrase.lower()
    out: list[int] = []
    at = hay.find(needle)
    while at >= 0 and needle:
        out.append(at)
        at = hay.find(needle, at + len(needle))
    return out


def _find(label: str, text: str, phrase: str, window: int) -> str:
    total = len(text)
    found = matches(text, phrase)
    if not found:
        return f"@@ {label} no match in {total} chars"
    centre = found[0] + len(phrase) // 2
    start = max(0, min(centre - window // 2, total - window))
    end = min(total, start + window)
    listed = " ".join(str(x) for x in found[:MATCHES_LISTED])
    if len(found) == 1:
        where = f"1 match at {listed}"
    elif len(found) <= MATCHES_LISTED:
        where = f"{len(found)} matches at {listed}"
    else:
        where = f"first {MATCHES_LISTED} of {len(found)} matches at {listed}"
    return f"@@ {label} [{start}..{end} of {total}] {where}\n{text[start:end]}"


def lines_page(label: str, text: str, offset: int | None, limit: int | None) -> str:
    """A page of a text of lines, framed like `cut` when it is not the whole text.

    The page is `[offset, end)`, where `end` is the last line end within `offset + limit`, so a row is
    never split (a first line longer than `limit` is cut at `limit`, rather than answer nothing).
    The whole text, asked from 0, comes unframed: it is what the caller asked for, as it is.
    """
    total = len(text)
    start = min(max(0, offset or 0), total)
    end = total if limit is None else min(total, start + max(0, limit))
    if end < total:
        line_end = text.rfind("\n", start, end)
        end = line_end + 1 if line_end >= 0 else end
    if start == 0 and end == total:
        return text
    return f"@@ {label} [{start}..{end} of {total}]\n{text[start:end]}"


def join(chunks: list[str], missing: list[str]) -> str:
    """The chunks in order, then one `@@ missing` chunk listing what was not found."""
    if missing:
        chunks = [*chunks, "@@ missing\n" + "\n".join(missing)]
    out = ""
    for c in chunks:
        out += c if not out or out.endswith("\n") else "\n" + c
    return out


def pos(text: str, query_words: list[str], window: int = FIND_WINDOW) -> int:
    """Where the query's words cluster densest: the start of the window holding most of them.

    Short texts (no longer than the window) answer 0; the window is centred on the cluster and
    clamped to the text.
    """
    total = len(text)
    if total <= window or not query_words:
        return 0
    lower = text.lower()
    hits = sorted((at, w) for w in set(query_words) for at in matches(lower, w))
    if not hits:
        return 0
    best, best_span = 0, (hits[0][0], hits[0][0])
    left = 0
    counts: dict[str, int] = {}
    for at, w in hits:
        counts[w] = counts.get(w, 0) + 1
        while at - hits[left][0] > window:
            lw = hits[left][1]
            counts[lw] -= 1
            if not counts[lw]:
                del counts[lw]
            left += 1
        if len(counts) > best:
            best, best_span = len(counts), (hits[left][0], at)
    centre = (best_span[0] + best_span[1]) // 2
    return max(0, min(centre - window // 2, total - window))
