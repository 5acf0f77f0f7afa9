"""The one check every call passes before it goes upstream: rules, then rates, then budgets, then asks.

`Gate.check` is what the proxy's addon (every listener: forward, CONNECT tunnels, reverse and model
listeners, a sealed command's TUN) and `flightlog mcp-record` await for each call. Order, so the
cheap and final answers come first and an operator is never asked about a call that would be
refused anyway: the policy's judgement (retired hosts, the first matching rule, the default); a
`deny` ends there. Then each rate limit whose scope holds (counted across the home's processes,
`egress.rates`), then each budget
(summed from the Ledger, for model calls), then, if the rule said `ask`, the operator.
"""

from __future__ import annotations

from egress.approvals import AskBook
from egress.budgets import BudgetBook
from egress.live import LivePolicy
from egress.rates import RateBook
from egress.rules import ALLOWED, Call, Decision


class Gate:
    """The policy in force and the books its limits keep."""

    def __init__(
        self,
        live: LivePolicy,
        asks: AskBook,
        budgets: BudgetBook | None = None,
        rates: RateBook | None = None,
    ) -> None:
        self.live = live
        self.asks = asks
        self.budgets = budgets
        self.rates = rates if rates is not None else RateBook()

    @property
    def idle(self) -> bool:
        """No policy to apply: every call passes without being looked at."""
        return self.live.policy.empty

    def judge(self, call: Call) -> Decision:
        """The policy's judgement alone (no limits, no waiting): what a connection can be told."""
        return self.live.policy.judge(call)

    def first(self, call: Call) -> tuple[Decision, bool]:
        """What can be said without waiting, and whether the call must still wait (`finish`): a
        budget to sum from the Ledger, or an operator to ask. Rates are counted here, once."""
        policy = self.live.policy
        if policy.empty:
            return ALLOWED, False
        decision = policy.judge(call)
        if decision.action == "deny":
            return decision, False
        for rate in policy.rates_for(call):
            refused = self.rates.take(rate, call)
            if refused is not None:
                return refused, False
        waits = decision.action == "ask" or (self.budgets is not None and bool(policy.budgets_for(call)))
        return decision, waits

    async def finish(self, call: Call, decision: Decision) -> Decision:
        """The budgets, then the operator if the rule said `ask` (after `first` said to wait)."""
        if self.budgets is not None:
            for budget in self.live.policy.budgets_for(call):
                refused = await self.budgets.check(budget, call)
                if refused is not None:
                    return refused
        if decision.action == "ask":
            pending = self.asks.open(call, decision, decision.ask_timeout)
            return await self.asks.wait(pending, decision)
        return decision

    async def check(self, call: Call) -> Decision:
        """The whole check of one call (module docstring)."""
        decision, waits = self.first(call)
        return await self.finish(call, decision) if waits else decision
