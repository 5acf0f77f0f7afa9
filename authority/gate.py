"""The one gate: may this token do VERB on TARGET through DOOR, now?

Every door asks `admit` (the proxy's routes, MCP over HTTP and stdio, the dispatch door and its
`flightlog call`, the Directory's writes and the door's own calls to flightlog.local), so a caveat
means the same wherever a token is shown. The gate:

1. knows the verb (`VERBS`) and the door (`caveats.DOORS`); anything else is refused;
2. without a token, allows only a verb that needs no right, or a caller the door vouches for (the
   operator's own process, `Ask.trusted`); everything else is refused by `token`;
3. verifies the token (`signature`; a caveat no verifier understands: `caveat`);
4. evaluates **every caveat the token carries**, in order, each by its rule in `RULES`; a caveat key
   without a rule is refused (so a caveat added to `authority.caveats` without a rule here can only
   refuse, never widen);
5. spends one use, atomically in the Ledger's database (`UseBook.spend`), when the verb spends and
   the token limits uses; a token whose uses are gone is refused by `uses`.

What each caveat limits, per verb:

| caveat              | call (run a row) | write (change rows) | ledger (read it) | read (the Directory) |
|---------------------|------------------|---------------------|------------------|----------------------|
| grants              | `call`           | `write`             | `ledger`         | (needs no right)     |
| doors, expires, for, task, uses | the request | the request      | the request      | the request          |
| tools, bundles, folders, contract | the row run | every row changed (before and after) | -  | -          |

Reading the Ledger or the Directory touches no row, so the row caveats do not limit it: a token
`tools = LEDGER_ROW, grants = call,ledger` may read the Ledger it was lent. `for` needs the request
to name its agent, and that agent (a request naming none is refused); `task` files the request
under its task whatever task the request names (two disagreeing `task` caveats allow nothing).
Reads (`read`) never spend a use.
The gate is pure except for `UseBook`: the caller passes the time, the identity the request claims
and the rows it touches as they are now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Protocol

from authority import tokens
from authority.caveats import DOORS, Caveat, Limits, Refusal, parse_instant
from authority.errors import AuthorityError


@dataclass(frozen=True, slots=True)
class Verb:
    """What a verb needs: the right (`grants`) it takes, whether rows are its target, whether it
    spends a use."""

    right: str | None
    rows: bool
    spends: bool


VERBS: Final[Mapping[str, Verb]] = {
    "read": Verb(right=None, rows=False, spends=False),
    "call": Verb(right="call", rows=True, spends=True),
    "write": Verb(right="write", rows=True, spends=True),
    "ledger": Verb(right="ledger", rows=False, spends=True),
}


@dataclass(frozen=True, slots=True)
class Row:
    """One Directory row a request acts on. `names` are its names before and after a change (one for
    a call); `contracts` its (name, contract hash) before and after (hash None: not a tool row)."""

    bundle: str
    path: str
    names: frozenset[str] = frozenset()
    contracts: tuple[tuple[str, str | None], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.bundle}/{self.path}"


@dataclass(frozen=True, slots=True)
class Ask:
    """One request, as the door sees it: the verb, the door, when, which rows, and who it says it is.

    `trusted`: the door vouches for a caller who shows no token (the operator's own process, or a
    proxy the operator opened on purpose); a token, when one is shown, is judged all the same."""

    verb: str
    door: str
    at: datetime
    rows: tuple[Row, ...] = ()
    agent: str | None = None
    task: str | None = None
    trusted: bool = False
    inner: bool = False
    """Made by the door for a call it admitted and spent a use for (a row whose contract calls
    flightlog's own routes): its token's uses are not judged again, so `uses <= 3` allows three
    calls of such a row, not two (the outer call's use may be the last)."""


class UseBook(Protocol):
    """Where a token's uses are counted: the Ledger's database (`storage.token_uses`)."""

    def used(self, identifier: str) -> int: ...

    def spend(self, identifier: str, limit: int, verb: str, door: str, at: datetime) -> int | None:
        """Record one more use when fewer than `limit` are recorded: the use's number, else None."""
        ...


class GateRefused(AuthorityError):
    """The gate's answer no: `limit` names the caveat (or `token`, `signature`, `caveat`, `verb`)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Admitted:
    """The gate's answer yes: the token's limits and identifier (None for a trusted caller or a verb
    that needs no token), and the use spent (None when none was)."""

    limits: Limits | None = None
    identifier: str | None = None
    use: int | None = None
    caveats: tuple[Caveat, ...] = field(default=())

    @property
    def task(self) -> str | None:
        return self.limits.filed_task if self.limits else None

    @property
    def agent(self) -> str | None:
        return self.limits.filed_agent if self.limits else None


@dataclass(frozen=True, slots=True)
class Judging:
    """What a caveat's rule looks at: the request, the token's folded limits, its uses so far."""

    ask: Ask
    verb: Verb
    limits: Limits
    identifier: str
    book: UseBook


Rule = Callable[[Caveat, Judging], Refusal | None]


def _grants(c: Caveat, j: Judging) -> Refusal | None:
    if j.verb.right is None or j.verb.right in c.members:
        return None
    return Refusal("grants", f"the token does not grant {j.verb.right!r} (it grants {c.value})")


def _doors(c: Caveat, j: Judging) -> Refusal | None:
    if j.ask.door in c.members:
        return None
    return Refusal("doors", f"the token does not allow the {j.ask.door!r} door (only {c.value})")


def _expires(c: Caveat, j: Judging) -> Refusal | None:
    return (
        Refusal("expires", f"the token expired at {c.value}") if j.ask.at >= parse_instant(c.value) else None
    )


def _for(c: Caveat, j: Judging) -> Refusal | None:
    if j.limits.agent is not None and not j.limits.agent:
        return Refusal("for", "the token's 'for' caveats disagree, so it allows nothing")
    if j.ask.agent is None:
        return Refusal("for", f"the token is for {c.value!r}; this request names no agent")
    if j.ask.agent not in c.members:
        return Refusal("for", f"the token is for {c.value!r}, not {j.ask.agent!r}")
    return None


def _task(c: Caveat, j: Judging) -> Refusal | None:
    if j.limits.task is not None and not j.limits.task:
        return Refusal("task", "the token's task caveats disagree, so it allows nothing")
    return None  # the request is filed under the token's task, whatever task it names


def _uses(c: Caveat, j: Judging) -> Refusal | None:
    if j.ask.inner:
        return None  # the call it is part of was judged and spent its use
    if j.book.used(j.identifier) >= int(c.value):
        return Refusal("uses", f"the token's {c.value} use(s) are spent")
    return None


def _row_rule(check: Callable[[Caveat, Row], str | None]) -> Rule:
    """A caveat that limits rows: checked on every row of a verb that has rows, else not a limit."""

    def rule(c: Caveat, j: Judging) -> Refusal | None:
        if not j.verb.rows:
            return None
        for row in j.ask.rows:
            if (why := check(c, row)) is not None:
                return Refusal(c.key, why)
        return None

    return rule


def _tools(c: Caveat, row: Row) -> str | None:
    allowed = {t.casefold() for t in c.members}
    outside = sorted(n for n in row.names if n.casefold() not in allowed)
    if not row.names:
        return f"the row {row.id} has no name the token's tools could allow"
    return f"the token does not allow the tool {outside[0]!r}" if outside else None


def _bundles(c: Caveat, row: Row) -> str | None:
    return None if row.bundle in c.members else f"the token does not allow rows of the bundle {row.bundle!r}"


def _folders(c: Caveat, row: Row) -> str | None:
    inside = any(row.id == f or row.id.startswith(f + "/") for f in c.members)
    return None if inside else f"the row {row.id} is outside the token's folders ({c.value})"


def _contract(c: Caveat, row: Row) -> str | None:
    bound = {(n.casefold(), h) for n, _, h in (m.rpartition(":") for m in c.members)}
    if not row.contracts:
        return f"the row {row.id} has no contract the token binds"
    for name, digest in row.contracts:
        if (name.casefold(), digest) in bound:
            continue
        mine = sorted(h for n, h in bound if n == name.casefold())
        if mine and digest is not None:
            return (
                f"the row {name!r} was rewritten since the token was minted "
                f"(token binds {mine[0]}, the row is now {digest})"
            )
        return f"the token binds no contract of the row {name!r}"
    return None


RULES: Final[Mapping[str, Rule]] = {
    "grants": _grants,
    "doors": _doors,
    "expires": _expires,
    "for": _for,
    "task": _task,
    "tools": _row_rule(_tools),
    "bundles": _row_rule(_bundles),
    "folders": _row_rule(_folders),
    "contract": _row_rule(_contract),
    "uses": _uses,
}
"""One rule per caveat key; the test asserts it covers `authority.caveats.KEYS`."""


def judge(caveats: Iterable[Caveat], limits: Limits, identifier: str, ask: Ask, book: UseBook) -> None:
    """Every caveat, in order, by its rule; the first refusal raises `GateRefused`."""
    verb = _verb(ask)
    judging = Judging(ask, verb, limits, identifier, book)
    for caveat in caveats:
        rule = RULES.get(caveat.key)
        if rule is None:
            raise GateRefused("caveat", f"the token carries a caveat the gate cannot judge: {caveat}")
        if (refusal := rule(caveat, judging)) is not None:
            raise GateRefused(refusal.limit, refusal.message)


def _verb(ask: Ask) -> Verb:
    verb = VERBS.get(ask.verb)
    if verb is None:
        raise GateRefused("verb", f"no such verb {ask.verb!r} (verbs: {', '.join(VERBS)})")
    if ask.door not in DOORS:
        raise GateRefused("doors", f"no such door {ask.door!r} (doors: {', '.join(DOORS)})")
    return verb


def admit(text: str | None, ask: Ask, root_key: bytes, book: UseBook, *, spend: bool = True) -> Admitted:
    """The gate (see the module docstring): `Admitted`, or `GateRefused` naming the limit.

    `spend=False` judges without spending (a dry run, or a door that spends later with `spend_use`
    once its own checks passed, so a call refused for its arguments costs no use)."""
    verb = _verb(ask)
    if not text:
        if verb.right is None or ask.trusted:
            return Admitted()
        raise GateRefused(
            "token", f"this needs a token granting {verb.right!r} (Authorization: Bearer flt_...)"
        )
    try:
        token = tokens.decode(text)
        limits = tokens.verify(token, root_key)
        caveats = token.parsed()
    except tokens.TokenRefused as e:
        raise GateRefused(e.limit, str(e)) from e
    except tokens.TokenError as e:
        raise GateRefused("token", str(e)) from e
    judge(caveats, limits, token.identifier, ask, book)
    admitted = Admitted(limits, token.identifier, None, caveats)
    return spend_use(admitted, ask, book) if spend else admitted


def spend_use(admitted: Admitted, ask: Ask, book: UseBook) -> Admitted:
    """Spend one use of an admitted token when its verb spends and it limits uses (atomic in the
    Ledger's database: of N requests racing for the last use, one gets it)."""
    limits = admitted.limits
    if limits is None or limits.uses is None or admitted.identifier is None or not _verb(ask).spends:
        return admitted
    use = book.spend(admitted.identifier, limits.uses, ask.verb, ask.door, ask.at)
    if use is None:
        raise GateRefused("uses", f"the token's {limits.uses} use(s) are spent")
    return Admitted(limits, admitted.identifier, use, admitted.caveats)
