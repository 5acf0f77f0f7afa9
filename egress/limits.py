"""Limits counted over time: budgets (tokens and cost of model calls) and request rates.

A budget is counted per agent, session or task (`per`), over the current UTC day or for good
(`period`), from the usage the Ledger already holds (`tokens_in + tokens_out`, `cost_usd`), and
refuses the next model call once the count reached the cap. A rate limit counts the calls it
scopes per agent, session or task in a sliding window, in this proxy process.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from egress.rules import Call, Scope

Per = Literal["agent", "session", "task"]
PERS: Final = ("agent", "session", "task")
Period = Literal["day", "all"]
PERIODS: Final = ("day", "all")


def key_of(call: Call, per: Per) -> str | None:
    """Whose count a call adds to: its agent, session or task (None: the caller did not say)."""
    value: str | None = getattr(call, per)
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    """Tokens and/or cost a caller may spend on model calls before the next one is refused."""

    name: str
    scope: Scope
    per: Per = "agent"
    period: Period = "day"
    tokens: int | None = None
    cost_usd: float | None = None

    def applies(self, call: Call) -> bool:
        """A model call in this budget's scope (budgets limit model calls only)."""
        return call.model_call and self.scope.matches(call)

    def since(self, now: datetime) -> datetime | None:
        """Where the count starts: the UTC day's midnight, or None (everything) for `all`."""
        if self.period == "all":
            return None
        day = now.astimezone(UTC)
        return day.replace(hour=0, minute=0, second=0, microsecond=0)

    def describe(self, who: str | None) -> str:
        caps = []
        if self.tokens is not None:
            caps.append(f"{self.tokens} tokens")
        if self.cost_usd is not None:
            caps.append(f"${self.cost_usd:g}")
        when = "a day (UTC)" if self.period == "day" else "in all"
        return f"{' and '.join(caps)} {when} for {self.per} {who or '(none given)'}"


@dataclass(frozen=True, slots=True)
class Rate:
    """At most `requests` calls in its scope per `window` for each agent, session or task."""

    name: str
    scope: Scope
    requests: int
    window: timedelta
    per: Per = "agent"

    def describe(self, who: str | None) -> str:
        seconds = self.window.total_seconds()
        return f"{self.requests} calls per {seconds:g} s for {self.per} {who or '(none given)'}"
