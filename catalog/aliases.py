"""`aliases.toml`: everyday words mapped to the name patterns of the rows they mean.

    imessage = ["IMSG_", "IMESSAGE", "BLOOIO"]     # seed 000's form: the rows beginning with these
    article = ["ARTICLE_*", "WRITE_ARTICLE"]      # shell-style globs (`*`, `?`, `[...]`) beside them

A pattern without a wildcard names every row whose name begins with it (so an exact name names
that row and its longer siblings); a pattern with one is a glob over the whole name. Both are
matched without regard to case. Every pattern must name at least one existing row. A pattern (or
an entry, or the whole file) that does not is a *problem*: loading skips it and reports it (one
warning line; `flightlog directory check` lists them all), so one bad alias never takes the
Directory down. A write that would leave an alias naming nothing is refused (`changes`).
"""

from __future__ import annotations

import fnmatch
import re
import tomllib

from catalog.errors import BadAlias
from catalog.folder import ALIASES_PATH
from catalog.index import Index
from catalog.words import normal

Aliases = dict[str, tuple[str, ...]]
Targets = dict[str, list[tuple[str, int]]]


def parse_aliases(text: str) -> Aliases:
    """The alias table from TOML text; raises `BadAlias` on the first problem (used on writes)."""
    aliases, problems = read_aliases(text)
    if problems:
        raise BadAlias(problems[0])
    return aliases


def read_aliases(text: str) -> tuple[Aliases, list[str]]:
    """The alias table from TOML text and its problems: a bad entry is skipped, never fatal."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return {}, [f"{ALIASES_PATH} is not valid TOML: {e}"]
    out: Aliases = {}
    problems: list[str] = []
    for key, value in raw.items():
        patterns = [value] if isinstance(value, str) else value
        if (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) and p for p in patterns)
        ):
            problems.append(f'{ALIASES_PATH}: alias "{key}" must be a pattern or a list of patterns')
            continue
        word = normal(key)
        if not word:
            problems.append(f'{ALIASES_PATH}: alias "{key}" has no words')
            continue
        out[word] = tuple(patterns)
    return out, problems


def resolve_aliases(aliases: Aliases, index: Index) -> Targets:
    """Each alias's rows; a pattern naming no row is left out (see `alias_problems`)."""
    out: Targets = {}
    for word, patterns in sorted(aliases.items()):
        found = [hit for pattern in patterns for hit in matching(pattern, index)]
        if found:
            out[word] = list(dict.fromkeys(found))
    return out


def alias_problems(aliases: Aliases, index: Index) -> list[str]:
    """One line for every pattern that names no row in the Directory."""
    return [
        f'{ALIASES_PATH}: alias "{word}" pattern "{pattern}" names no row in the Directory'
        for word, patterns in sorted(aliases.items())
        for pattern in patterns
        if not matching(pattern, index)
    ]


_WILD = re.compile(r"[*?\[]")


def name_matches(pattern: str, name: str) -> bool:
    """Whether `name` is one of the rows `pattern` names (a prefix, or a glob when it has a wildcard)."""
    lower, name = pattern.lower(), name.lower()
    return fnmatch.fnmatchcase(name, lower) if _WILD.search(lower) else name.startswith(lower)


def matching(pattern: str, index: Index) -> list[tuple[str, int]]:
    """Rows whose name matches `pattern` (case-insensitive); prefixes use the sorted names."""
    lower = pattern.lower()
    head = _WILD.split(lower, maxsplit=1)[0]
    out: list[tuple[str, int]] = []
    for bundle, section in index.sections.items():
        if not _WILD.search(lower) or lower == head + "*":
            out.extend((bundle, i) for i in section.lower_prefixed(head))
        else:
            regex = re.compile(fnmatch.translate(lower))
            candidates = section.lower_prefixed(head) if head else range(len(section.stems))
            out.extend((bundle, i) for i in candidates if regex.match(section.names[i].lower()))
    return out
