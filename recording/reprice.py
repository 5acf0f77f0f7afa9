"""Recorded model calls priced again with today's prices, beside the cost recorded with them.

A derived view, never a write: the Ledger is append-only, and the cost an event carries is what its
call was priced at when it was recorded (the prices known then). Prices change (a model gets one,
an override is added, a provider cuts a rate), so `reprice` answers what the same recorded tokens
cost with the prices known now, per model, side by side with the recorded figures; running it
again gives it again, so nothing of it needs storing (a stored reprice would only make two costs
for one call and ask which is right).

Each call is priced at its own time (`genai-prices` keeps dated prices) from its recorded counts:
every input token, of which cache reads and writes at their rates, and every output token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from formats.model_apis import api_of, provider_of
from recording.prices import PriceTable
from storage.filters import Filter
from storage.priced_calls import Call, recorded_calls
from storage.reader import Reader

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


@dataclass(frozen=True, slots=True)
class Repriced:
    """One model's calls: the cost recorded with them and the cost with today's prices, each with
    the calls it could not price."""

    model: str
    calls: int
    recorded_usd: float
    recorded_unpriced: int
    repriced_usd: float
    repriced_unpriced: int

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "calls": self.calls,
            "recorded_usd": round(self.recorded_usd, 9),
            "recorded_unpriced": self.recorded_unpriced,
            "repriced_usd": round(self.repriced_usd, 9),
            "repriced_unpriced": self.repriced_unpriced,
        }


def price_now(call: Call, table: PriceTable) -> float | None:
    """What one recorded call costs with `table`, at the call's own time."""
    api = api_of(call.url)
    provider = provider_of(call.url or "", api) if api is not None else None
    return table.cost(
        call.model,
        call.tokens_in,
        call.tokens_out,
        cache_read=call.cache_read,
        cache_write=call.cache_write,
        cache_write_1h=call.cache_write_1h,
        provider=provider,
        at=call.at,
    )


def reprice(calls: Iterable[Call], table: PriceTable) -> list[Repriced]:
    """Per model (most calls first), the recorded and today's cost of `calls`."""
    sums: dict[str, list[Any]] = {}
    for call in calls:
        now = price_now(call, table)
        row = sums.setdefault(call.model, [0, 0.0, 0, 0.0, 0])
        row[0] += 1
        row[1] += call.cost_usd or 0.0
        row[2] += call.cost_usd is None
        row[3] += now or 0.0
        row[4] += now is None
    out = [Repriced(model, *figures) for model, figures in sums.items()]
    return sorted(out, key=lambda r: (-r.calls, r.model))


def reprice_answer(source: Engine | Reader, flt: Filter, table: PriceTable) -> dict[str, Any]:
    """The reprice view as `flightlog ledger reprice --json` prints it: per model and in total."""
    rows = reprice(recorded_calls(source, flt), table)
    return {
        "filter": flt.to_json(),
        "prices": table.source,
        "models": [r.to_json() for r in rows],
        "calls": sum(r.calls for r in rows),
        "recorded_usd": round(sum(r.recorded_usd for r in rows), 9),
        "recorded_unpriced": sum(r.recorded_unpriced for r in rows),
        "repriced_usd": round(sum(r.repriced_usd for r in rows), 9),
        "repriced_unpriced": sum(r.repriced_unpriced for r in rows),
    }
