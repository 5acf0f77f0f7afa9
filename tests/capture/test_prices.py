"""The price table: shipped data, the user's override, cost arithmetic, and no guessing."""

from __future__ import annotations

from pathlib import Path

import pytest

from recording.errors import PriceError
from recording.prices import PriceTable


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return PriceTable.load()


def test_shipped_table_has_common_models_and_says_where_prices_come_from(table: PriceTable) -> None:
    """The shipped data covers the common OpenAI and Anthropic models and names its source and date."""
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "text-embedding-3-small", "claude-sonnet-4-5"):
        assert table.price(model) is not None, model
    assert "openai.com" in table.source and "anthropic.com" in table.source
    assert table.as_of[:4].isdigit()


def test_cost_arithmetic(table: PriceTable) -> None:
    """Cost is tokens times the per-million price, input and output priced separately."""
    # gpt-4o: $2.50 in, $10.00 out per million tokens.
    assert table.cost("gpt-4o", 1_000_000, 0) == pytest.approx(2.50)
    assert table.cost("gpt-4o", 0, 1_000_000) == pytest.approx(10.00)
    assert table.cost("gpt-4o", 19, 10) == pytest.approx((19 * 2.50 + 10 * 10.00) / 1e6)
    # claude-sonnet-4-5: $3 in, $15 out.
    assert table.cost("claude-sonnet-4-5", 2200, 503) == pytest.approx((2200 * 3 + 503 * 15) / 1e6)
    assert table.cost("text-embedding-3-small", 8, 0) == pytest.approx(8 * 0.02 / 1e6)


def test_unknown_model_or_missing_tokens_gives_none(table: PriceTable) -> None:
    """No entry, no cost: never a guess, also for names that merely look like a known family."""
    assert table.cost("llama3.2", 100, 100) is None
    assert table.cost("gpt-4o-turbo-preview-xyz", 100, 100) is None
    assert table.cost("openai/gpt-4o", 100, 100) is None
    assert table.cost(None, 100, 100) is None
    assert table.cost("gpt-4o", None, 100) is None


def test_dated_names_use_the_documented_prefix_rule(table: PriceTable) -> None:
    """A name ending in a date is priced as its family unless it has an explicit entry of its own."""
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o")
    assert table.price("gpt-4o-mini-2024-07-18") == table.price("gpt-4o-mini")  # not gpt-4o
    assert table.price("claude-sonnet-4-5-20250929") == table.price("claude-sonnet-4-5")
    # An explicit dated entry wins: the first gpt-4o snapshot was priced higher.
    assert table.cost("gpt-4o-2024-05-13", 1_000_000, 0) == pytest.approx(5.00)
    # A date suffix only: other suffixes do not fall back.
    assert table.price("gpt-4o-audio-preview") is None


def test_user_override_wins_and_adds(tmp_path: Path) -> None:
    """Entries in the user's prices.toml replace shipped ones and add new models."""
    user = tmp_path / "prices.toml"
    user.write_text(
        '[meta]\nas_of = "2026-11-30"\n[models]\n'
        '"gpt-4o" = { input = 1.00, output = 2.00 }\n'
        '"llama3.2" = { input = 0.0, output = 0.0 }\n',
        encoding="utf-8",
    )
    table = PriceTable.load(user)
    assert table.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(3.00)
    assert table.cost("gpt-4o-2024-08-06", 1_000_000, 0) == pytest.approx(1.00)  # the family override
    assert table.cost("llama3.2", 1000, 1000) == 0.0
    assert table.cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)  # shipped entries remain
    assert str(user) in table.source and table.as_of == "2026-11-30"


def test_missing_user_file_is_fine_and_malformed_one_is_an_error(tmp_path: Path) -> None:
    """No override file means the shipped table; a broken one is a clear error naming the file."""
    assert PriceTable.load(tmp_path / "absent.toml").price("gpt-4o") is not None
    bad = tmp_path / "prices.toml"
    bad.write_text("[models]\n'x' = { input = 'cheap' }\n", encoding="utf-8")
    with pytest.raises(PriceError, match=r"prices.toml: model 'x'"):
        PriceTable.load(bad)
    bad.write_text("[models\n", encoding="utf-8")
    with pytest.raises(PriceError, match="not valid TOML"):
        PriceTable.load(bad)
