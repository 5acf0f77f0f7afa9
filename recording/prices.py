"""Model prices: pydantic's `genai-prices` library, with the user's override file winning.

`genai-prices` is kept up to date by its maintainers for every major provider, knows cache-read and
cache-write rates, long-context tiers and dated price changes: flightlog ships no table of its own
(the hand-kept one went stale and priced cache reads and writes as full input). The user's file
(`FLIGHTLOG_HOME/prices.toml`, `[models]` entries of `{input, output}` US dollars per million tokens,
optionally `cache_read`, `cache_write` and `cache_write_1h`) wins for the models it names: a private
deployment, a negotiated rate, a local model at 0.

A call is priced as its provider prices it: `tokens_in` counts every input token, of which
`cache_read` and `cache_write` are priced at their own rates (of the writes, those kept an hour at the
one-hour rate where the answer said so) and the rest at the input rate; every
output token (reasoning included) at the output rate. The library's price at the request's time is
used. A model neither the override nor the library knows gets None, never a guess: counts say so.
For an override, a name ending in a date (`-YYYY-MM-DD` or `-YYYYMMDD`) without an entry of its own
is priced as the name without the date (`gpt-4o-2024-08-06` as `gpt-4o`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any

from formats.usage import Usage
from recording.errors import PriceError

_DATED = re.compile(r"^(.+)-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
_MILLION = Decimal(1_000_000)
_KEYS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")


def library_source() -> str:
    """Where prices come from when the user's file does not name the model."""
    try:
        return f"genai-prices {metadata.version('genai-prices')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - installed with flightlog
        return "genai-prices"


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens: input, output, and cache reads and writes (input's when unsaid;
    an hour's writes at the writes' rate when that is all the user gave)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    cache_write_1h: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Tokens:
    """What one call used: every input and output token, the input tokens cached apart, and of the
    cache writes those kept an hour."""

    tokens_in: int
    tokens_out: int
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0


@dataclass(frozen=True)
class PriceTable:
    """The user's overrides by model name (lower case) over `genai-prices`, with where they came from."""

    prices: dict[str, Price] = field(default_factory=dict)
    source: str = field(default_factory=library_source)
    as_of: str = ""

    @classmethod
    def load(cls, user_file: Path | None = None) -> PriceTable:
        """The library's prices, with `user_file`'s entries (if the file exists) taking precedence.

        Loads the library now, so whoever starts with prices (the proxy) pays for it at its start."""
        _library()
        if user_file is None or not Path(user_file).exists():
            return cls()
        try:
            text = Path(user_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise PriceError(f"cannot read price file {user_file}: {e}") from e
        meta, prices = _parse(text, str(user_file))
        source = f"{user_file} over {library_source()}" if prices else library_source()
        return cls(prices, source, str(meta.get("as_of", "")) if prices else "")

    def warm(self) -> None:
        """Load the library and its model lookup now (a writer before it reads its first frame)."""
        library_cost("gpt-4o", Tokens(1, 1), "openai", None)

    def price(self, model: str) -> Price | None:
        """The user's price of a model: its own entry, else (for a dated name) its family's, else None."""
        key = model.strip().lower()
        found = self.prices.get(key)
        if found is None:
            dated = _DATED.match(key)
            if dated:
                found = self.prices.get(dated.group(1))
        return found

    def cost_of(self, usage: Usage, at: datetime | None = None) -> float | None:
        """USD for one call as `formats.usage` read it, at `at` (None: now)."""
        return self.cost(
            usage.model,
            usage.tokens_in,
            usage.tokens_out,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
            cache_write_1h=usage.cache_write_1h,
            provider=usage.provider,
            at=at,
        )

    def cost(
        self,
        model: str | None,
        tokens_in: int | None,
        tokens_out: int | None,
        *,
        cache_read: int | None = None,
        cache_write: int | None = None,
        cache_write_1h: int | None = None,
        provider: str | None = None,
        at: datetime | None = None,
    ) -> float | None:
        """USD for one call, or None when the model is unknown or a token count is missing.

        `provider` is `formats.usage`'s (`openai`, `anthropic`, or `<api>-compatible` on another
        host, priced as the API's own provider); `at` the request's time (None: now)."""
        if not model or tokens_in is None or tokens_out is None:
            return None
        write = int(cache_write or 0)
        used = Tokens(
            int(tokens_in), int(tokens_out), int(cache_read or 0), write, min(int(cache_write_1h or 0), write)
        )
        own = self.price(model)
        if own is not None:
            return float(override_cost(own, used))
        return library_cost(model, used, provider, at)


def override_cost(price: Price, used: Tokens) -> Decimal:
    """The user's price applied: uncached input, cache reads, cache writes and output at their rates."""
    uncached = max(0, used.tokens_in - used.cache_read - used.cache_write)
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    hour = write if price.cache_write_1h is None else price.cache_write_1h
    writes = write * (used.cache_write - used.cache_write_1h) + hour * used.cache_write_1h
    total = price.input * uncached + read * used.cache_read + writes
    return (total + price.output * used.tokens_out) / _MILLION


def provider_id(provider: str | None) -> str | None:
    """The `genai-prices` provider for `formats.usage`'s: an API's compatible servers as its own."""
    if not provider:
        return None
    return provider.removesuffix("-compatible")


def library_cost(model: str, used: Tokens, provider: str | None, at: datetime | None) -> float | None:
    """`genai-prices`' figure for one call, or None when it does not know the model (or the
    counts contradict each other: more cached than input tokens)."""
    genai = _library()
    usage = genai.Usage(
        input_tokens=used.tokens_in,
        output_tokens=used.tokens_out,
        cache_read_tokens=used.cache_read or None,
        cache_write_tokens=used.cache_write or None,
        cache_write_1h_tokens=used.cache_write_1h or None,
    )
    try:
        found = genai.calc_price(usage, model, provider_id=provider_id(provider), genai_request_timestamp=at)
    except (LookupError, ValueError):
        return None
    return float(found.total_price)


def _library() -> Any:
    """`genai_prices`, imported when first needed: it loads every provider's prices, which the
    commands that only name this module (`replay`'s options, say) would otherwise pay for."""
    import genai_prices

    return genai_prices


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
        if not isinstance(entry, dict) or set(entry) - set(_KEYS) or "input" not in entry:
            raise PriceError(
                f"{source}: model {name!r} needs {{input = USD, output = USD}} per million tokens"
                f" (and optionally {', '.join(_KEYS[2:])})"
            )
        values = {k: entry.get(k) for k in _KEYS if k in entry}
        values.setdefault("output", 0)
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in values.values()
        ):
            raise PriceError(f"{source}: model {name!r} has a price that is not a non-negative number")
        dec = {k: Decimal(str(v)) for k, v in values.items()}
        prices[name.strip().lower()] = Price(
            dec["input"],
            dec["output"],
            dec.get("cache_read"),
            dec.get("cache_write"),
            dec.get("cache_write_1h"),
        )
    return meta, prices
