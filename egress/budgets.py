"""Budgets counted from the Ledger, so usage is counted once, where flightlog already records it.

Before a model call in a budget's scope is forwarded, the gate sums the usage columns of the
caller's events for the budget's period (`storage.usage_totals`) and refuses the call once the sum
reached a cap. The Ledger is written off the proxy's path (the writer commits every commit interval,
`addons.capture_options.COMMIT_MS`), so
the answers this proxy has already passed on may not be stored yet: each is remembered when it ends
(`answered`), and a check first waits until they are (`settle`, at most `WAIT_MAX`).

What "off by at most one call in flight" means: every call whose answer went out before this check
began is counted; the only usage a check cannot see is that of calls still running (forwarded
while under the cap, their answer not finished). A loop that makes one call at a time therefore
stops at the first call after the one that reached the cap: it overshoots by at most that one call.
N calls at once may overshoot by N; with `--workers N`, a call another worker answered within its
last commit interval may be missed as well.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from egress.limits import Budget, key_of
from egress.rules import Call, Decision
from storage import kinds

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

log = logging.getLogger("flightlog.egress")

WAIT_MAX: Final = 3.0
"""How long a check waits for answers already sent to reach the Ledger (the writer is behind)."""
POLL: Final = 0.02


class BudgetBook:
    """The Ledger's usage, and the answers this proxy sent that may not be in it yet."""

    def __init__(self, ledger_url: str, wait_max: float = WAIT_MAX) -> None:
        self.ledger_url = ledger_url
        self.wait_max = wait_max
        self._engine: Engine | None = None
        self._awaiting: dict[str, float] = {}
        """The answer event id of each model call answered here, not yet seen in the Ledger -> when."""

    def answered(self, action_id: str) -> None:
        """A model call's answer went out (or it failed): its usage is in the Ledger soon."""
        self._awaiting[kinds.event_id(action_id, kinds.RESPONSE_ROLE)] = time.monotonic()

    def _engine_now(self) -> Engine:
        if self._engine is None:
            from storage.engine import make_engine

            self._engine = make_engine(self.ledger_url)
        return self._engine

    async def _engine_ready(self) -> Engine:
        """The Ledger's engine, made off the event loop the first time (SQLAlchemy loads then)."""
        return self._engine if self._engine is not None else await asyncio.to_thread(self._engine_now)

    async def settle(self) -> None:
        """Wait until every answer remembered is in the Ledger (or waited for `wait_max`)."""
        from storage.usage_totals import committed

        while self._awaiting:
            ids = list(self._awaiting)
            engine = await self._engine_ready()
            stored = await asyncio.to_thread(committed, engine, ids)
            now = time.monotonic()
            for event_id in ids:
                since = self._awaiting.get(event_id)
                if event_id in stored:
                    self._awaiting.pop(event_id, None)
                elif since is not None and now - since > self.wait_max:
                    self._awaiting.pop(event_id, None)
                    log.warning(
                        "flightlog: egress budget: %s is not in the Ledger after %.0f s; judging without it",
                        event_id,
                        self.wait_max,
                    )
            if self._awaiting:
                await asyncio.sleep(POLL)

    async def check(self, budget: Budget, call: Call, now: datetime | None = None) -> Decision | None:
        """A refusal when the caller's usage in `budget`'s period reached a cap, else None."""
        from storage.usage_totals import spent

        await self.settle()
        who = key_of(call, budget.per)
        since = budget.since(now or datetime.now(UTC))
        engine = await self._engine_ready()
        tokens, cost = await asyncio.to_thread(spent, engine, budget.per, who, since)
        over_tokens = budget.tokens is not None and tokens >= budget.tokens
        over_cost = budget.cost_usd is not None and cost >= budget.cost_usd
        if not (over_tokens or over_cost):
            return None
        limit = f"{budget.describe(who)}: {tokens} tokens and ${cost:.6f} spent"
        details = {"tokens_spent": tokens, "cost_usd_spent": round(cost, 6)}
        return Decision("deny", budget.name, limit, details=details)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
