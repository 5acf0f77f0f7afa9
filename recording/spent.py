"""What an AI call's answer says it used (model, every token count) and what that cost.

Read on the writer thread from the recorded pair with `formats.usage` and priced with
`recording.prices`. An answer that says nothing of its usage (an error, a 429) is still the model
its request named, so counts by model include its failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from formats.usage import requested_model

if TYPE_CHECKING:
    from recording.prices import PriceTable
    from recording.records import ResponseRecord


class Reading(Protocol):
    """How the writer reads usage and prices it (`recording.events.Processing`)."""

    @property
    def extract_usage(self) -> Any: ...

    @property
    def prices(self) -> PriceTable | None: ...


@dataclass(frozen=True, slots=True)
class Spent:
    """What an AI call's answer says it used, and its cost (None where unknown or not an AI call).

    `tokens_in` counts every input token and `tokens_out` every output token; `cache_read` and
    `cache_write` are of the input (`cache_write_1h` of the writes), `reasoning` of the output
    (`formats.usage.Usage`)."""

    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    cache_write_1h: int | None = None


NOTHING = Spent()


def usage_of(proc: Reading, rec: ResponseRecord, body: bytes | None) -> Spent:
    """Model, tokens and cost of an AI call's answer; an error answer (or none at all: the upstream
    failed) is the model its request named, with no tokens; `NOTHING` for anything else."""
    if proc.extract_usage is None:
        return NOTHING
    if rec.status is None or rec.status >= 400:
        model = requested_model(rec.exchange.url, rec.request_body or b"")
        return NOTHING if model is None else Spent(model)
    usage = None
    if body is not None:
        try:
            usage = proc.extract_usage(
                rec.exchange.url,
                rec.request_body or b"",
                body,
                rec.content_type or None,
                rec.content_encoding or None,
            )
        except Exception:  # a body we cannot read is not a reason to lose the event
            usage = None
    if usage is None:  # a success that is no model answer we can read: no model is claimed for it
        return NOTHING
    started = rec.timing[0] if rec.timing[0] is not None else rec.at
    at = datetime.fromtimestamp(started, UTC)
    cost = proc.prices.cost_of(usage, at) if proc.prices is not None else None
    return Spent(
        usage.model,
        usage.tokens_in,
        usage.tokens_out,
        cost,
        usage.cache_read,
        usage.cache_write,
        usage.reasoning,
        usage.cache_write_1h,
    )
