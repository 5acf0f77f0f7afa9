"""One row of the Directory as written: a Markdown document with a YAML frontmatter block.

The frontmatter (between `---` lines at the top) holds at least `name` and `description`; a tool
adds `args` (JSON Schema) and `upstream` (its contract). Everything else is the body. Sections are
the document's headings, slugged, so `get` can return one part of a long row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final

_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_FENCE = re.compile(r"^(```|~~~)", re.M)
_LINK = re.compile(r"\[\[([^\]|#\n]+)(?:[#|][^\]\n]*)?\]\]")
_SLUG = re.compile(r"[^\w]+")

FRONTMATTER_SECTION: Final = "frontmatter"
BODY_SECTION: Final = "body"


@dataclass(frozen=True, slots=True)
class Section:
    """A named span `[start, end)` of a document's text."""

    slug: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Document:
    """A row's whole text and what it says: frontmatter mapping, body, and parse warnings."""

    bundle: str
    path: str
    text: str
    hash: str
    id: str = ""
    frontmatter: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name") or self.path.rsplit("/", 1)[-1].removesuffix(".md"))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description") or "")


@cache
def _loader() -> Any:
    """libyaml's safe loader (many times faster), else the pure one: both read the same documents."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> tuple[dict[str, Any], str, list[str]]:
    """Split `text` into its frontmatter mapping and body, with warnings instead of failures.

    A row that cannot be parsed is still a row (its text is kept exactly); the warnings say why
    it will not behave as a tool.
    """
    match = _FRONTMATTER.match(text)
    if not match:
        return {}, text, ["no frontmatter: a row needs `name` and `description` between --- lines"]
    warnings: list[str] = []
    import yaml  # deferred: only a section rebuild or a whole-row read parses; `find` never does

    try:
        loaded = yaml.load(match.group(1), Loader=_loader())
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else "invalid"
        return {}, text[match.end() :], [f"frontmatter is not valid YAML: {first}"]
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        return {}, text[match.end() :], ["frontmatter is not a mapping"]
    for key in ("name", "description"):
        if not loaded.get(key):
            warnings.append(f"frontmatter has no `{key}`")
    return {str(k): v for k, v in loaded.items()}, text[match.end() :], warnings


def body_start(text: str) -> int:
    """Where the body begins (0 when there is no frontmatter)."""
    match = _FRONTMATTER.match(text)
    return match.end() if match else 0


def slug(heading: str) -> str:
    """A heading as a section name: lowercase words joined by `_`."""
    return _SLUG.sub("_", heading.lower()).strip("_") or "section"


def sections(text: str) -> list[Section]:
    """The frontmatter, the body before the first heading, then one section per heading.

    Headings inside fenced code blocks are not headings. Repeated slugs get `_2`, `_3`, ...
    """
    out: list[Section] = []
    start = body_start(text)
    if start:
        out.append(Section(FRONTMATTER_SECTION, 0, start))
    fenced = _fenced_spans(text, start)
    heads = [
        (m.start(), slug(m.group(2)))
        for m in _HEADING.finditer(text, start)
        if not any(a <= m.start() < b for a, b in fenced)
    ]
    first = heads[0][0] if heads else len(text)
    out.append(Section(BODY_SECTION, start, first))
    seen: dict[str, int] = {}
    for n, (at, name) in enumerate(heads):
        seen[name] = seen.get(name, 0) + 1
        label = name if seen[name] == 1 else f"{name}_{seen[name]}"
        end = heads[n + 1][0] if n + 1 < len(heads) else len(text)
        out.append(Section(label, at, end))
    return out


def _fenced_spans(text: str, start: int) -> list[tuple[int, int]]:
    marks = [m.start() for m in _FENCE.finditer(text, start)]
    return [(marks[i], marks[i + 1]) for i in range(0, len(marks) - 1, 2)]


def links(frontmatter: dict[str, Any], body: str) -> list[str]:
    """The ids a row points at: `[[id]]` in the body and a `links` list in the frontmatter."""
    found: list[str] = []
    listed = frontmatter.get("links")
    if isinstance(listed, list):
        found.extend(str(x).strip().removeprefix("[[").removesuffix("]]") for x in listed)
    found.extend(m.group(1).strip() for m in _LINK.finditer(body))
    return list(dict.fromkeys(x.removesuffix(".md") for x in found if x))
