"""Model prices: the table shipped as data (recording/prices.toml) merged with the user's override file.

Costs are computed from recorded token counts. An unknown model gets None, never a guess; the one
documented fallback is that a name ending in a date (`-YYYY-MM-DD` or `-YYYYMMDD`) that has no entry
of its own is priced as the name without the date (`gpt-4o-2024-08-06` as `gpt-4o`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

from recording.errors import PriceError

_DATED = re.compile(r"^(.+)-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
_MILLION = Decimal(1_000_000)


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million input and output tokens."""

    input: Decimal
    output: Decimal


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name (lower case), with where they came from."""

    prices: dict[str, Price] = field(default_factory=dict)
    source: str = ""
    as_of: str = ""

    @classmethod
    def load(cls, user_file: Path | None = None) -> PriceTable:
        """The shipped table, with `user_file`'s entries (if the file exists) taking precedence."""
        shipped = resources.files("recording").joinpath("prices.toml").read_text(encoding="utf-8")
        meta, prices = _parse(shipped, "the shipped price table")
        if user_file is not None and Path(user_file).exists():
            try:
                text = Path(user_file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise PriceError(f"cannot read price file {user_file}: {e}") from e
            user_meta, user_prices = _parse(text, str(user_file))
            prices.update(user_prices)
            if user_prices:
                meta = {
                    "source": f"{user_file} over {meta.get('source', 'shipped table')}",
                    "as_of": str(user_meta.get("as_of", meta.get("as_of", ""))),
                }
        return cls(prices, str(meta.get("source", "")), str(meta.get("as_of", "")))

    def price(self, model: str) -> Price | None:
        """The price of a model: its own entry, else (for a dated name) its family's, else None."""
        key = model.strip().lower()
        found = self.prices.get(key)
        if found is None:
            dated = _DATED.match(key)
            if dated:
                found = self.prices.get(dated.group(1))
        return found

    def cost(self, model: str | None, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """USD for one call, or None when the model is unknown or a token count is missing."""
        if not model or tokens_in is None or tokens_out is None:
            return None
        price = self.price(model)
        if price is None:
            return None
        total = (price.input * int(tokens_in) + price.output * int(tokens_out)) / _MILLION
        return float(total)


def _parse(text: str, source: str) -> tuple[dict[str, Any], dict[str, Price]]:
    """(meta, prices) of one TOML price file: `[meta]` and `[models]` with `{input, output}` entries."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PriceError(f"{source}: not valid TOML: {e}") from e
    meta = data.get("meta", {})
    models = data.get("models", {})
    if not isinstance(meta, dict) or not isinstance(models, dict):
        raise PriceError(f"{source}: [meta] and [models] must be tables")
    prices: dict[str, Price] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or set(entry) - {"input", "output"} or "input" not in entry:
            raise PriceError(
                f"{source}: model {name!r} needs {{input = USD, output = USD}} per million tokens"
            )
        values = [entry.get("input"), entry.get("output", 0)]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in values):
            raise PriceError(f"{source}: model {name!r} has a price that is not a non-negative number")
        prices[name.strip().lower()] = Price(Decimal(str(values[0])), Decimal(str(values[1])))
    return meta, prices
