"""Which rules may match a host, without reading every rule: the policy stays cheap at 1,000 rules.

Rules are indexed by their host patterns: exact names and addresses (canonical) in a dict,
`*.domain` and `.domain` under the domain (a host looks up itself and each parent domain: a
handful of dict reads), and the rest
(`*`, no hosts at all, networks, globs) in short lists tried in turn. `candidates(host)` is a superset
of the rules whose host condition holds, in file order; the engine still checks each one whole, so
the index can only make a decision faster, never different. Answers are kept per host (bounded).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from egress.patterns import HostPattern
from egress.rules import Rule

CACHE_MAX: Final = 4096


class HostIndex:
    """The rules (by position in the list given) each host may meet."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._exact: dict[str, list[int]] = {}
        self._domains: dict[str, list[int]] = {}
        self._everywhere: list[int] = []
        self._other: list[tuple[int, HostPattern]] = []
        for i, rule in enumerate(rules):
            if not rule.scope.hosts:
                self._everywhere.append(i)
            for pattern in rule.scope.hosts:
                if pattern.kind == "any":
                    self._everywhere.append(i)
                elif pattern.kind in ("exact", "address"):
                    self._exact.setdefault(pattern.name, []).append(i)
                elif pattern.kind in ("suffix", "domain"):
                    self._domains.setdefault(pattern.name, []).append(i)
                else:
                    self._other.append((i, pattern))
        self._cache: dict[str, tuple[int, ...]] = {}

    def candidates(self, host: str) -> tuple[int, ...]:
        """Positions of the rules whose host patterns may name `host`, in order."""
        found = self._cache.get(host)
        if found is not None:
            return found
        hits = set(self._everywhere)
        hits.update(self._exact.get(host, ()))
        if self._domains:
            name = host
            while True:
                hits.update(self._domains.get(name, ()))
                dot = name.find(".")
                if dot < 0:
                    break
                name = name[dot + 1 :]
        for i, pattern in self._other:
            if i not in hits and pattern.matches(host, pattern.port):
                hits.add(i)
        found = tuple(sorted(hits))
        if len(self._cache) >= CACHE_MAX:
            self._cache.clear()
        self._cache[host] = found
        return found
