"""`aliases.toml`: everyday words mapped to the name patterns of the rows they mean.

    imessage = ["IMSG_*", "IMESSAGE*"]
    article = ["ARTICLE_*", "WRITE_ARTICLE"]

Patterns are shell-style (`*`, `?`), matched against row names without regard to case. Every
pattern must name at least one existing row: an alias that names nothing is an error when the
Directory loads, never a silent no-op.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from typing import Final

from catalog.errors import BadAlias
from catalog.index import NAME, Index
from catalog.words import normal

ALIASES_PATH: Final = "aliases.toml"
"""Where the alias table lives: the root of the Directory folder (bundle "" in the store)."""

Aliases = dict[str, tuple[str, ...]]
Targets = dict[str, list[tuple[str, int]]]


def parse_aliases(text: str) -> Aliases:
    """The alias table from TOML text; a value is one pattern or a list of them."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadAlias(f"{ALIASES_PATH} is not valid TOML: {e}") from e
    out: Aliases = {}
    for key, value in raw.items():
        patterns = [value] if isinstance(value, str) else value
        if (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) and p for p in patterns)
        ):
            raise BadAlias(f'{ALIASES_PATH}: alias "{key}" must be a pattern or a list of patterns')
        word = normal(key)
        if not word:
            raise BadAlias(f'{ALIASES_PATH}: alias "{key}" has no words')
        out[word] = tuple(patterns)
    return out


def resolve_aliases(aliases: Aliases, index: Index) -> Targets:
    """Each alias's rows; raises `BadAlias` naming the first pattern that names no row."""
    out: Targets = {}
    for word, patterns in sorted(aliases.items()):
        found: list[tuple[str, int]] = []
        for pattern in patterns:
            hits = matching(pattern, index)
            if not hits:
                raise BadAlias(
                    f'{ALIASES_PATH}: alias "{word}" pattern "{pattern}" names no row in the Directory'
                )
            found.extend(hits)
        out[word] = list(dict.fromkeys(found))
    return out


_WILD = re.compile(r"[*?\[]")


def matching(pattern: str, index: Index) -> list[tuple[str, int]]:
    """Rows whose name matches `pattern` (case-insensitive); prefix patterns use the sorted names."""
    lower = pattern.lower()
    head = _WILD.split(lower, maxsplit=1)[0]
    out: list[tuple[str, int]] = []
    for bundle, section in index.sections.items():
        if not _WILD.search(lower):
            out.extend((bundle, i) for i in section.exact.get(lower, ()))
        elif lower == head + "*":
            out.extend((bundle, i) for i in section.lower_prefixed(head))
        else:
            regex = re.compile(fnmatch.translate(lower))
            candidates = section.lower_prefixed(head) if head else range(len(section.rows))
            out.extend((bundle, i) for i in candidates if regex.match(section.rows[i][NAME].lower()))
    return out
