"""Spend as counts show it: a model call nobody prices says so (`$0.0123 + ? (3 unknown)`) instead of
summing as $0, and `ledger reprice` prices recorded calls with today's prices beside their recorded
cost without writing a thing (the Ledger is append-only; its chain still verifies after)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage.event_reads import counts, totals
from storage.events import Event
from storage.filters import Filter
from storage.ledger import open_ledger
from storage.tally import tally_answer
from tests.storage.factory import batch, event
from tui.figures import spend

ANTHROPIC = "https://api.anthropic.com/v1/messages"


def _calls() -> list[Event]:
    """Two priced gpt-4o answers, three answers of a model no price is known for, one 429 that named
    a model (no tokens: nothing to price, nothing unknown) and a request (no model)."""
    out = [event(0)]
    priced = [("gpt-4o", 0.0100), ("gpt-4o", 0.0023)]
    for i, (model, cost) in enumerate(
        [*priced, ("house-model", None), ("house-model", None), ("house-model", None)]
    ):
        out.append(event(2 * i + 1, model=model, tokens_in=1000, tokens_out=100, cost_usd=cost))
    out.append(event(11, model="claude-sonnet-4-5", status=429))
    return out


@pytest.mark.parametrize(
    ("cost", "unpriced", "shown"),
    [(0.0123, 3, "$0.0123 + ? (3 unknown)"), (0.0, 2, "? (2 unknown)"), (0.0123, 0, "$0.0123"), (0.0, 0, "")],
)
def test_spend_reads_unknown_as_unknown(cost: float, unpriced: int, shown: str) -> None:
    """The one place a summed cost is written with the calls it could not price."""
    assert spend(cost, unpriced) == shown


def test_counts_totals_and_tally_count_the_calls_they_could_not_price(
    ledger_url: str, tmp_path: Path
) -> None:
    """By model, in total and in a tally, on SQLite and PostgreSQL: the cost is the priced calls'
    sum and `unpriced` the calls with tokens and no price; a 429 is not unpriced."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    try:
        ledger.append(batch(_calls()))
        by_model = {g.key: g for g in counts(ledger.engine, Filter(), "model")}
        summed = totals(ledger.engine, Filter())
        tallied = tally_answer(ledger.engine, Filter(), ["model", "agent"])
    finally:
        ledger.close()
    assert (by_model["gpt-4o"].cost_usd, by_model["gpt-4o"].unpriced) == (pytest.approx(0.0123), 0)
    assert (by_model["house-model"].cost_usd, by_model["house-model"].unpriced) == (0.0, 3)
    assert (by_model["claude-sonnet-4-5"].events, by_model["claude-sonnet-4-5"].unpriced) == (1, 0)
    assert by_model["house-model"].to_json()["unpriced"] == 3
    assert (summed["cost_usd"], summed["unpriced"]) == (pytest.approx(0.0123), 3)
    assert (tallied["cost_usd"], tallied["unpriced"]) == (pytest.approx(0.0123), 3)


def _flightlog(home: Path, *args: str) -> str:
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    env.pop("FLIGHTLOG_LEDGER", None)
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _seeded(home: Path) -> None:
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        ledger.append(batch(_calls()))
    finally:
        ledger.close()


def test_counts_and_tally_commands_show_unknown_cost(home: Path) -> None:
    """`ledger counts` (totals and --by model) and `ledger tally` write the cost with its unknowns."""
    home.mkdir()
    _seeded(home)
    assert "cost_usd           $0.0123 + ? (3 unknown)" in _flightlog(home, "ledger", "counts")
    by_model = _flightlog(home, "ledger", "counts", "--by", "model")
    assert "? (3 unknown)" in next(line for line in by_model.splitlines() if "house-model" in line)
    assert "$0.0123" in next(line for line in by_model.splitlines() if "gpt-4o" in line)
    tally = _flightlog(home, "ledger", "tally", "--by", "model", "--by", "agent")
    assert "? (3 unknown)" in next(line for line in tally.splitlines() if "house-model" in line)
    spent = _flightlog(home, "ledger", "ask", "how", "much", "did", "we", "spend").splitlines()
    assert "cost_usd\t$0.0123 + ? (3 unknown)" in spent and not any(s.startswith("unpriced") for s in spent)


def test_reprice_answers_with_todays_prices_beside_the_recorded_and_writes_nothing(home: Path) -> None:
    """A model priced after its calls were recorded (here by an override added later) is priced by
    `reprice`; a recorded cost stays as recorded in the Ledger, and the chain verifies after."""
    home.mkdir()
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    cached = {"cache_read_tokens": 20000, "cache_write_tokens": 3000}
    try:
        ledger.append(batch([
            *_calls(),
            event(13, url=ANTHROPIC, model="claude-sonnet-4-5", tokens_in=23012, tokens_out=40,
                  cost_usd=0.069636, **cached),  # priced as full input when recorded
        ]))  # fmt: skip
    finally:
        ledger.close()
    (home / "prices.toml").write_text('[models]\n"house-model" = { input = 1.0, output = 10.0 }\n')
    before = _flightlog(home, "ledger", "query", "--json", "--limit", "100")
    answer = json.loads(_flightlog(home, "ledger", "reprice", "--json"))
    models = {m["model"]: m for m in answer["models"]}
    assert models["house-model"] == {
        "model": "house-model", "calls": 3, "recorded_usd": 0.0, "recorded_unpriced": 3,
        "repriced_usd": pytest.approx(3 * (1000 * 1.0 + 100 * 10.0) / 1e6), "repriced_unpriced": 0,
    }  # fmt: skip
    sonnet = models["claude-sonnet-4-5"]
    assert sonnet["recorded_usd"] == pytest.approx(0.069636)
    assert sonnet["repriced_usd"] == pytest.approx((12 * 3 + 3000 * 3.75 + 20000 * 0.3 + 40 * 15) / 1e6)
    assert answer["calls"] == 6 and answer["repriced_unpriced"] == 0 and str(home) in answer["prices"]
    table = _flightlog(home, "ledger", "reprice")
    assert "? (3 unknown)" in next(line for line in table.splitlines() if "house-model" in line)
    assert _flightlog(home, "ledger", "query", "--json", "--limit", "100") == before
    assert _flightlog(home, "ledger", "verify").strip().endswith("ok")


def test_reprice_reads_the_recorded_calls_alike_on_both_databases(ledger_url: str, tmp_path: Path) -> None:
    """The calls a price applies to (model and tokens; not the 429, not the request) are read with
    their times and counts (cache reads, writes and the hour's share of them too) from SQLite and
    PostgreSQL alike, and priced at today's prices."""
    from recording.prices import PriceTable
    from recording.reprice import reprice_answer

    hour = {"cache_read_tokens": 20000, "cache_write_tokens": 3000, "cache_write_1h_tokens": 1000}
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    try:
        sonnet = event(13, url=ANTHROPIC, model="claude-sonnet-4-5", tokens_in=23012, tokens_out=40, **hour)
        ledger.append(batch([*_calls(), sonnet]))
        answer = reprice_answer(ledger.engine, Filter(), PriceTable())
    finally:
        ledger.close()
    models = {m["model"]: m for m in answer["models"]}
    assert set(models) == {"gpt-4o", "house-model", "claude-sonnet-4-5"} and answer["calls"] == 6
    assert models["claude-sonnet-4-5"]["repriced_usd"] == pytest.approx(
        (12 * 3 + 20000 * 0.3 + 2000 * 3.75 + 1000 * 6 + 40 * 15) / 1e6
    )
    assert models["gpt-4o"]["recorded_usd"] == pytest.approx(0.0123)
    assert models["gpt-4o"]["repriced_usd"] == pytest.approx(2 * (1000 * 2.5 + 100 * 10) / 1e6)
    assert (models["house-model"]["recorded_unpriced"], models["house-model"]["repriced_unpriced"]) == (3, 3)


def test_the_parts_priced_apart_are_shown_wherever_a_call_is_read(home: Path) -> None:
    """Cache reads, cache writes and reasoning tokens (the counts a price treats apart) are in
    `ledger row`'s text and JSON, in a HAR export's `_flightlog`, and in the browser's detail, where
    the answer stated them; a call that stated none shows no such line."""
    from storage.event_reads import event as read_event
    from storage.reader import open_reader
    from tui.cells import summary

    home.mkdir()
    details = {"cache_read_tokens": 20000, "cache_write_tokens": 3000, "reasoning_tokens": 512,
               "cache_write_1h_tokens": 1000}  # fmt: skip
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        ledger.append(batch([
            event(0, url=ANTHROPIC),
            event(1, url=ANTHROPIC, model="claude-sonnet-4-5", tokens_in=23012, tokens_out=600,
                  cost_usd=0.08, **details),
            event(3, url=ANTHROPIC, model="claude-sonnet-4-5", tokens_in=10, tokens_out=5, cost_usd=0.001),
        ]))  # fmt: skip
    finally:
        ledger.close()

    text = _flightlog(home, "ledger", "row", "ev-000001")
    for name, value in details.items():
        assert f"  {name}: {value}\n" in text, text
    assert "cache_read_tokens" not in _flightlog(home, "ledger", "row", "ev-000003")
    as_json = json.loads(_flightlog(home, "ledger", "row", "ev-000001", "--json"))
    assert {name: as_json[name] for name in details} == details

    har = json.loads(_flightlog(home, "export", "--format", "har"))
    stated = [e["_flightlog"] for e in har["log"]["entries"] if "cache_read_tokens" in e["_flightlog"]]
    assert len(stated) == 1 and {name: stated[0][name] for name in details} == details, stated

    reader = open_reader(f"sqlite:///{home / 'ledger.db'}")
    try:
        stated_row, plain_row = read_event(reader, "ev-000001"), read_event(reader, "ev-000003")
    finally:
        reader.close()
    assert stated_row is not None and plain_row is not None
    shown, plain = dict(summary(stated_row)), dict(summary(plain_row))
    assert shown["of them"] == "cache read 20,000 · cache write 3,000 (1h 1,000) · reasoning 512"
    assert "of them" not in plain
