"""Prices: genai-prices' figures (cache reads and writes at their own rates, dated prices), the
user's override file winning, and no guessing for a model nobody prices."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from recording.errors import PriceError
from recording.prices import PriceTable, provider_id


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load()


def test_the_library_prices_current_models_and_names_itself(table: PriceTable) -> None:
    """Without an override file every common (and current) model has a price, from genai-prices."""
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "gpt-5", "text-embedding-3-small"):
        assert table.cost(model, 1000, 10, provider="openai") is not None, model
    for model in (
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
        "claude-haiku-4-5-20251001",
        "claude-opus-4-5",
    ):
        assert table.cost(model, 1000, 10, provider="anthropic") is not None, model
    assert table.source.startswith("genai-prices ")


def test_cost_arithmetic_as_the_providers_price(table: PriceTable) -> None:
    """Input and output at their rates; of the input, cache reads and writes at theirs (Anthropic's
    sonnet 4.5: $3 input, $15 output, $0.30 cache read, $3.75 cache write per million; OpenAI's
    gpt-4o: $2.50 input, $1.25 cached input, $10 output)."""
    assert table.cost("claude-sonnet-4-5", 2200, 503, provider="anthropic") == pytest.approx(
        (2200 * 3 + 503 * 15) / 1e6
    )
    cached = table.cost(
        "claude-sonnet-4-5", 2200, 503, cache_read=2000, cache_write=100, provider="anthropic"
    )
    assert cached == pytest.approx((100 * 3 + 2000 * 0.30 + 100 * 3.75 + 503 * 15) / 1e6)
    assert table.cost("gpt-4o", 1000, 100, cache_read=800, provider="openai") == pytest.approx(
        (200 * 2.50 + 800 * 1.25 + 100 * 10) / 1e6
    )
    assert table.cost("text-embedding-3-small", 8, 0, provider="openai") == pytest.approx(8 * 0.02 / 1e6)


def test_a_compatible_server_is_priced_as_its_apis_provider(table: PriceTable) -> None:
    """A local or proxied server speaking Anthropic's API is priced with Anthropic's prices."""
    assert provider_id("anthropic-compatible") == "anthropic" and provider_id(None) is None
    assert table.cost("claude-sonnet-4-5", 100, 10, provider="anthropic-compatible") == table.cost(
        "claude-sonnet-4-5", 100, 10, provider="anthropic"
    )


def test_prices_are_the_ones_at_the_requests_time(table: PriceTable) -> None:
    """genai-prices keeps dated prices: OpenAI cut o3's input price from $10 to $2 per million on
    2025-06-10, and a call is priced at its request's time."""
    before = table.cost("o3", 1_000_000, 0, provider="openai", at=datetime(2025, 5, 1, tzinfo=UTC))
    after = table.cost("o3", 1_000_000, 0, provider="openai", at=datetime(2025, 7, 1, tzinfo=UTC))
    assert (before, after) == (pytest.approx(10.0), pytest.approx(2.0))


def test_unknown_model_or_missing_tokens_gives_none(table: PriceTable) -> None:
    """No price, no cost: never a guess, never $0."""
    assert table.cost("llama3.2", 100, 100, provider="openai-compatible") is None
    assert table.cost("gpt-4o-turbo-preview-xyz", 100, 100, provider="openai") is None
    assert table.cost(None, 100, 100) is None
    assert table.cost("gpt-4o", None, 100, provider="openai") is None
    assert table.cost("gpt-4o", 10, 1, cache_read=50, provider="openai") is None  # counts that contradict


def test_user_override_wins_and_adds(tmp_path: Path) -> None:
    """Entries in the user's prices.toml replace the library's and add new models; a dated name
    falls back to its family's entry; cache rates default to the input rate."""
    user = tmp_path / "prices.toml"
    user.write_text(
        '[meta]\nas_of = "2026-11-30"\n[models]\n'
        '"gpt-4o" = { input = 1.00, output = 2.00 }\n'
        '"llama3.2" = { input = 0.0, output = 0.0 }\n'
        '"house-model" = { input = 2.0, output = 4.0, cache_read = 0.5, cache_write = 3.0 }\n',
        encoding="utf-8",
    )
    table = PriceTable.load(user)
    assert table.cost("gpt-4o", 1_000_000, 1_000_000, provider="openai") == pytest.approx(3.00)
    assert table.cost("gpt-4o-2024-08-06", 1_000_000, 0) == pytest.approx(1.00)  # the family override
    assert table.cost("gpt-4o", 1_000_000, 0, cache_read=500_000) == pytest.approx(1.00)
    assert table.cost("llama3.2", 1000, 1000) == 0.0
    assert table.cost("house-model", 1000, 0, cache_read=500, cache_write=100) == pytest.approx(
        (400 * 2.0 + 500 * 0.5 + 100 * 3.0) / 1e6
    )
    assert table.cost("gpt-4o-mini", 1_000_000, 0, provider="openai") == pytest.approx(0.15)  # the library's
    assert str(user) in table.source and table.as_of == "2026-11-30"


def test_an_hours_cache_writes_take_the_hour_rate_the_user_gave_else_the_writes_rate(tmp_path: Path) -> None:
    """`cache_write_1h` prices the writes kept an hour; an entry without it prices them as its other
    writes (what the user said a write costs), never as plain input."""
    user = tmp_path / "prices.toml"
    user.write_text(
        "[models]\n"
        '"house-model" = { input = 2.0, output = 4.0, cache_write = 3.0, cache_write_1h = 5.0 }\n'
        '"plain-model" = { input = 2.0, output = 4.0, cache_write = 3.0 }\n',
        encoding="utf-8",
    )
    table = PriceTable.load(user)
    hour = {"cache_write": 300, "cache_write_1h": 200}
    assert table.cost("house-model", 1000, 0, **hour) == pytest.approx(
        (700 * 2.0 + 100 * 3.0 + 200 * 5.0) / 1e6
    )
    assert table.cost("plain-model", 1000, 0, **hour) == pytest.approx((700 * 2.0 + 300 * 3.0) / 1e6)
    # a count of hour writes above the writes (a junk answer) is held to the writes
    assert table.cost("house-model", 1000, 0, cache_write=300, cache_write_1h=900) == pytest.approx(
        (700 * 2.0 + 300 * 5.0) / 1e6
    )


def test_missing_user_file_is_fine_and_malformed_one_is_an_error(tmp_path: Path) -> None:
    """No override file means the library's prices; a broken one is a clear error naming the file."""
    assert PriceTable.load(tmp_path / "absent.toml").cost("gpt-4o", 1, 1, provider="openai") is not None
    bad = tmp_path / "prices.toml"
    bad.write_text("[models]\n'x' = { input = 'cheap' }\n", encoding="utf-8")
    with pytest.raises(PriceError, match=r"prices.toml: model 'x'"):
        PriceTable.load(bad)
    bad.write_text("[models]\n'x' = { input = 1, discount = 2 }\n", encoding="utf-8")
    with pytest.raises(PriceError, match=r"prices.toml: model 'x' needs"):
        PriceTable.load(bad)
    bad.write_text("[models\n", encoding="utf-8")
    with pytest.raises(PriceError, match="not valid TOML"):
        PriceTable.load(bad)
