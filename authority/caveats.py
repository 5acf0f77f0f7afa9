"""The limits a scoped token carries, written as readable caveats, and the check that enforces them.

A caveat is one line of text, `KEY OP VALUE`, that anyone can read:

```
tools = weather,search        only these tools (Directory row names)
doors = http,mcp,cli          only through these doors
uses <= 5                     at most this many calls, counted in the Ledger
expires < 2026-12-01T00:00:00Z  only before this instant (UTC)
task = T42                    every call is filed under this task (one name)
bundles = tool                only rows of these bundles
for = alice                   on behalf of this agent (one name; a caller claiming another is refused)
grants = call,ledger          only these rights: `call` (run calls), `ledger` (read the Ledger),
                              `write` (change the Directory)
contract = weather:9f2c...    only these rows, each with exactly this contract (`catalog.local_rows`
                              .contract_hash): a rewritten row refuses the token (limit `contract`)
folders = tool/public,sandbox only rows inside these folders of the Directory (a row's id is
                              BUNDLE/PATH; `tool/public` holds `tool/public/x.md`, `sandbox` a bundle)
```

What each caveat limits for each verb (running a call, changing the Directory, reading the Ledger or
the Directory) is decided in one place, `authority.gate`, which evaluates every caveat a token carries.

A token with no `grants` caveat holds every right (the operator's full authority); `flightlog token
mint` therefore always writes one (`grants = call` unless told otherwise).

Caveats are conjunctive: a token allows a call only when every one of its caveats does, so appending
a caveat can only narrow what the token allows (two `tools` caveats leave the intersection; two `uses`
caveats the smaller; two `expires` the earlier). An unknown key or a malformed line is refused, never
ignored: a verifier that skipped what it did not understand would widen the token.

Inside a token caveats are kept compact (`uses<=5`); `str(caveat)` gives the spaced, readable form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from authority.errors import AuthorityError

SET_KEYS: Final = ("tools", "doors", "task", "bundles", "for", "grants", "contract", "folders")
"""Keys whose value is a comma-separated set; the token allows a member of every such caveat."""
DOORS: Final = ("http", "mcp", "cli")
GRANTS: Final = ("call", "ledger", "write")
"""The rights a token can hold: run calls, read the Ledger, change the Directory."""
KEYS: Final = (*SET_KEYS, "uses", "expires")
"""Every caveat a token can carry (the gate has one rule for each, `authority.gate.RULES`)."""

_LINE = re.compile(r"^\s*([a-z]+)\s*(<=|<|=)\s*(\S(?:.*\S)?)\s*$")
_OPS: Final = {
    "tools": "=",
    "doors": "=",
    "task": "=",
    "bundles": "=",
    "for": "=",
    "grants": "=",
    "contract": "=",
    "folders": "=",
    "uses": "<=",
    "expires": "<",
}
_NAME = re.compile(r"^[A-Za-z0-9_.:@/-]+$")
_BINDING = re.compile(r"^[A-Za-z0-9_.@/-]+:[0-9a-f]{8,64}$")


class CaveatError(AuthorityError):
    """A caveat that cannot be understood: refused, because ignoring it would widen a token."""


@dataclass(frozen=True, slots=True)
class Caveat:
    """One parsed caveat: `key`, its operator and its normalised value."""

    key: str
    op: str
    value: str

    @property
    def compact(self) -> str:
        """The form kept inside a token (no spaces: every byte makes the link longer)."""
        return f"{self.key}{self.op}{self.value}"

    def __str__(self) -> str:
        return f"{self.key} {self.op} {self.value}"

    @property
    def members(self) -> frozenset[str]:
        """The set a set-valued caveat allows."""
        return frozenset(self.value.split(","))


def parse(line: str) -> Caveat:
    """Read one caveat (spaced or compact); anything unknown or malformed raises `CaveatError`."""
    if "\n" in line or "\r" in line:
        raise CaveatError(f"a caveat is one line: {line!r}")
    m = _LINE.match(line)
    if not m:
        raise CaveatError(f"unreadable caveat {line!r} (expected KEY OP VALUE, e.g. 'uses <= 3')")
    key, op, value = m.groups()
    if key not in _OPS:
        raise CaveatError(f"unknown caveat {key!r} in {line!r} (known: {', '.join(KEYS)})")
    if op != _OPS[key]:
        raise CaveatError(f"caveat {key!r} takes {_OPS[key]!r}, not {op!r}")
    if key in SET_KEYS:
        members = [m.strip() for m in value.split(",")]
        if not all(members) or not all(_NAME.match(m) for m in members):
            raise CaveatError(f"caveat {key!r} needs comma-separated names, got {value!r}")
        if key in ("task", "for") and len(members) != 1:
            raise CaveatError(f"caveat {key!r} names exactly one {'task' if key == 'task' else 'agent'}")
        if key == "doors" and (bad := [d for d in members if d not in DOORS]):
            raise CaveatError(f"unknown door {bad[0]!r} (doors are {', '.join(DOORS)})")
        if key == "grants" and (bad := [g for g in members if g not in GRANTS]):
            raise CaveatError(f"unknown right {bad[0]!r} (rights are {', '.join(GRANTS)})")
        if key == "contract" and (bad := [c for c in members if not _BINDING.match(c)]):
            raise CaveatError(f"caveat 'contract' needs TOOL:HASH pairs, got {bad[0]!r}")
        if key == "folders":
            members = [m.strip("/") for m in members]
            if not all(members) or any(p in (".", "..") for m in members for p in m.split("/")):
                raise CaveatError(f"caveat 'folders' needs BUNDLE[/FOLDER] paths, got {value!r}")
        return Caveat(key, op, ",".join(members))
    if key == "uses":
        if not value.isdigit():
            raise CaveatError(f"caveat 'uses' needs a whole number, got {value!r}")
        return Caveat(key, op, str(int(value)))
    return Caveat(key, op, format_instant(parse_instant(value)))


def parse_instant(value: str) -> datetime:
    """An ISO 8601 instant with a zone (`Z` or an offset), as UTC; a naive time is refused."""
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError as e:
        raise CaveatError(f"caveat 'expires' needs an ISO 8601 instant, got {value!r}") from e
    if at.tzinfo is None:
        raise CaveatError(f"caveat 'expires' needs a time zone (e.g. {value}Z), got {value!r}")
    return at.astimezone(UTC)


def format_instant(at: datetime) -> str:
    """UTC, whole seconds, `Z`: the shortest unambiguous readable instant."""
    return at.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Limits:
    """What a chain of caveats allows, folded into one value (None = that limit is not set)."""

    tools: frozenset[str] | None = None
    doors: frozenset[str] | None = None
    task: frozenset[str] | None = None
    bundles: frozenset[str] | None = None
    agent: frozenset[str] | None = None
    uses: int | None = None
    expires: datetime | None = None
    grants: frozenset[str] | None = None
    contracts: frozenset[str] | None = None
    folders: frozenset[str] | None = None

    def names_tool(self, name: str) -> bool:
        """Whether a `tools` caveat names `name` (row names are matched case-insensitively, as the
        Directory finds them); False when the token names no tools at all."""
        return self.tools is not None and name.casefold() in {t.casefold() for t in self.tools}

    def binds(self, name: str, contract: str | None) -> bool:
        """Whether a `contract` caveat allows `name` with this contract hash (no caveat: any)."""
        if self.contracts is None:
            return True
        return any(
            n.casefold() == name.casefold() and h == contract
            for n, _, h in (c.rpartition(":") for c in self.contracts)
        )

    def grants_right(self, right: str) -> bool:
        """Whether the token holds `right` (no `grants` caveat: every right)."""
        return self.grants is None or right in self.grants

    def as_dict(self) -> dict[str, object]:
        """A stable JSON-ready view (sets sorted, the instant as text), for `token inspect --json`."""

        def members(s: frozenset[str] | None) -> list[str] | None:
            return None if s is None else sorted(s)

        return {
            "tools": members(self.tools),
            "doors": members(self.doors),
            "uses": self.uses,
            "expires": None if self.expires is None else format_instant(self.expires),
            "task": members(self.task),
            "bundles": members(self.bundles),
            "for": members(self.agent),
            "grants": members(self.grants),
            "contract": members(self.contracts),
            "folders": members(self.folders),
        }

    @property
    def filed_task(self) -> str | None:
        """The task every call made with the token is filed under (None when unbound or contradictory)."""
        return min(self.task) if self.task and len(self.task) == 1 else None

    @property
    def filed_agent(self) -> str | None:
        """The agent every call made with the token is made for."""
        return min(self.agent) if self.agent and len(self.agent) == 1 else None


def fold(caveats: Iterable[Caveat]) -> Limits:
    """Combine caveats into the `Limits` they jointly allow (intersections, minimums, earliest)."""
    sets: dict[str, frozenset[str] | None] = dict.fromkeys(SET_KEYS)
    uses: int | None = None
    expires: datetime | None = None
    for c in caveats:
        if c.key in SET_KEYS:
            prior = sets[c.key]
            sets[c.key] = c.members if prior is None else prior & c.members
        elif c.key == "uses":
            uses = int(c.value) if uses is None else min(uses, int(c.value))
        else:
            at = parse_instant(c.value)
            expires = at if expires is None else min(expires, at)
    return Limits(
        tools=sets["tools"],
        doors=sets["doors"],
        task=sets["task"],
        bundles=sets["bundles"],
        agent=sets["for"],
        uses=uses,
        expires=expires,
        grants=sets["grants"],
        contracts=sets["contract"],
        folders=sets["folders"],
    )


def narrows(before: Limits, caveat: Caveat) -> bool:
    """Whether adding `caveat` changes what `before` allows (a caveat that does not is pointless)."""
    return fold_onto(before, caveat) != before


def fold_onto(limits: Limits, caveat: Caveat) -> Limits:
    """`limits` narrowed by one more caveat."""
    extra = fold([caveat])
    inter = _intersect
    return Limits(
        tools=inter(limits.tools, extra.tools),
        doors=inter(limits.doors, extra.doors),
        task=inter(limits.task, extra.task),
        bundles=inter(limits.bundles, extra.bundles),
        agent=inter(limits.agent, extra.agent),
        uses=_least(limits.uses, extra.uses),
        expires=_least(limits.expires, extra.expires),
        grants=inter(limits.grants, extra.grants),
        contracts=inter(limits.contracts, extra.contracts),
        folders=inter(limits.folders, extra.folders),
    )


def _intersect(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    return a if b is None else a & b


def _least[T: (int, datetime)](a: T | None, b: T | None) -> T | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call is not allowed: the `limit` that refused it and one readable line."""

    limit: str
    message: str
