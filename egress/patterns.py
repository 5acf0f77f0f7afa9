"""The patterns a policy rule matches with: hosts (the one host language) and globs.

Hosts are written and compared as `formats.hosts` reads them, the language secrets' hosts and
retired hosts speak too: names (`api.example.com`), subdomains (`*.example.com`), a domain and its
subdomains (`.example.com`), addresses in any spelling, networks (`10.0.0.0/8`), shell globs, `*`,
each with an optional `:PORT`.

Globs elsewhere (paths, agents, tools, argument values) are shell globs in which `*` also crosses
`/`; a glob without a wildcard is an exact comparison, one ending in its only `*` a prefix test:
the common cases cost a string compare.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from typing import Final

from egress.errors import PolicyFileError
from formats.hosts import HostError, HostPattern, parse_pattern

Matcher = Callable[[str], bool]
_WILD: Final = re.compile(r"[*?\[]")

__all__ = ["HostPattern", "Matcher", "any_glob", "glob", "host_pattern"]


def glob(pattern: str) -> Matcher:
    """A matcher for one glob (see the module's docstring)."""
    if not _WILD.search(pattern):
        return pattern.__eq__
    if pattern.endswith("*") and not _WILD.search(pattern[:-1]):
        prefix = pattern[:-1]
        return lambda text: text.startswith(prefix)
    return re.compile(fnmatch.translate(pattern), re.DOTALL).match  # type: ignore[return-value]


def any_glob(patterns: Iterable[str]) -> Matcher:
    """A matcher for a list of globs: true when one of them matches."""
    matchers = tuple(glob(p) for p in patterns)
    if len(matchers) == 1:
        return matchers[0]
    return lambda text: any(m(text) for m in matchers)


def host_pattern(text: str, where: str) -> HostPattern:
    """Read one host pattern; a malformed one is an error naming `where` it was written."""
    try:
        return parse_pattern(text)
    except HostError as e:
        raise PolicyFileError(f"{where}: {e}") from e
