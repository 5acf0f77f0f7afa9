"""Limits over time without a proxy: rates in a sliding window, budgets summed from a real Ledger
(SQLite and PostgreSQL), a budget check that waits for answers already sent to be stored, and asks
answered (or not) through the asks folder."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from egress.approvals import AskBook
from egress.budgets import BudgetBook
from egress.errors import AskError
from egress.policy_file import parse_policy
from egress.rates import RateBook
from egress.rules import Call, Decision
from storage.events import Batch, Event
from storage.ledger import open_ledger

NOW = datetime(2026, 12, 6, 15, 0, tzinfo=UTC)
MODEL_CALL = Call("http", "api.openai.com", 443, "POST", "/v1/chat/completions", "alpha", "s1", "t1")


def answer(
    i: int, at: datetime, agent: str | None, tokens: int, cost: float | None = None, **more: object
) -> Event:
    return Event(
        event_id=f"act-{i}:response", action_id=f"act-{i}", kind="http.response", direction="out", at=at,
        collector="test", seq=i, agent=agent, session=more.get("session", "s1"),  # type: ignore[arg-type]
        tokens_in=tokens // 2, tokens_out=tokens - tokens // 2, cost_usd=cost, head=b"HTTP/1.1 200 OK",
    )  # fmt: skip


def test_a_rate_counts_calls_in_its_window_per_caller() -> None:
    """`requests` calls per window per agent pass; the next is refused naming the rate and when
    to retry; once the oldest ages out one more passes; another agent has a window of its own;
    a refused call is not counted."""
    clock = [100.0]
    book = RateBook(clock=lambda: clock[0])
    (rate,) = parse_policy({"rate": [{"name": "r", "requests": 2, "window": "10s"}]}, "x").rates
    assert book.take(rate, MODEL_CALL) is None
    clock[0] += 1
    assert book.take(rate, MODEL_CALL) is None
    refused = book.take(rate, MODEL_CALL)
    assert refused is not None and refused.rule == "r" and "2 calls per 10 s for agent alpha" in refused.limit
    assert refused.details["retry_after_s"] == pytest.approx(9.0)
    other = Call("http", "h", 443, "GET", "/", "beta")
    assert book.take(rate, other) is None
    clock[0] += 9.5  # the first call (at 100) ages out at 110
    assert book.take(rate, MODEL_CALL) is None
    assert book.take(rate, MODEL_CALL) is not None


def test_processes_of_one_home_share_a_rates_count(tmp_path: Path) -> None:
    """Two books on the home's one file (two workers, or a worker and `mcp-record`) count together:
    3 calls a minute is 3 whichever process each call reaches, refused at the one that sees the fourth.
    A home where the file cannot be made still counts, alone (one line says so)."""
    clock = [100.0]
    path = tmp_path / "home" / "rates.db"
    first, second = RateBook(path, clock=lambda: clock[0]), RateBook(path, clock=lambda: clock[0])
    (rate,) = parse_policy({"rate": [{"name": "r", "requests": 3, "window": "1m"}]}, "x").rates
    taken = [book.take(rate, MODEL_CALL) for book in (first, second, first, second)]
    assert taken[:3] == [None, None, None] and taken[3] is not None and "3 in the last 60 s" in taken[3].limit
    clock[0] += 60.5  # the three age out together
    assert second.take(rate, MODEL_CALL) is None
    first.close()
    second.close()
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the home's folder should be: nothing can be made in it
    alone = RateBook(blocked / "rates.db", clock=lambda: clock[0])
    assert [alone.take(rate, MODEL_CALL) is None for _ in range(4)] == [True, True, True, False]


def test_a_budget_sums_the_callers_usage_of_the_day(ledger_url: str, tmp_path: Path) -> None:
    """The budget adds up tokens (in + out) and cost of the agent's events since midnight UTC from
    the Ledger itself (yesterday's and other agents' do not count) and refuses once a cap is
    reached, naming the budget, the cap and what was spent; `period = "all"` counts every day."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    events = [
        answer(1, NOW - timedelta(days=1), "alpha", 500, 1.0),
        answer(2, NOW.replace(hour=1), "alpha", 60, 0.01),
        answer(3, NOW.replace(hour=2), "alpha", 30, None),
        answer(4, NOW.replace(hour=2), "beta", 900, 9.0),
    ]
    ledger.append(Batch("test", 1, tuple(events)))
    ledger.close()
    budgets = parse_policy(
        {"budget": [
            {"name": "day", "tokens": 100},
            {"name": "tight", "tokens": 90},
            {"name": "cost", "cost_usd": 0.5, "period": "all"},
            {"name": "session", "tokens": 1000, "per": "session", "period": "all"},
        ]},
        "x",
    ).budgets  # fmt: skip
    book = BudgetBook(ledger_url)
    try:
        results = {b.name: asyncio.run(book.check(b, MODEL_CALL, NOW)) for b in budgets}
    finally:
        book.close()
    assert results["day"] is None  # 90 of 100 tokens today
    tight = results["tight"]
    assert tight is not None and tight.rule == "tight"
    assert "90 tokens a day (UTC) for agent alpha: 90 tokens" in tight.limit
    assert tight.details["tokens_spent"] == 90
    cost = results["cost"]
    assert cost is not None and cost.details["cost_usd_spent"] == pytest.approx(1.01)
    session = results["session"]
    assert session is not None and session.details["tokens_spent"] == 1490  # every agent of s1


def test_a_budget_check_waits_for_answers_already_sent(tmp_path: Path) -> None:
    """An answer the proxy has passed on but the writer has not stored yet is waited for: the check
    that follows sees its usage (what makes a loop of calls stop at the cap, off by at most the
    one call still in flight), and one never stored is given up on after `wait_max`."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = open_ledger(url, (tmp_path / "blobs").as_uri())
    (budget,) = parse_policy({"budget": [{"name": "b", "tokens": 50}]}, "x").budgets
    book = BudgetBook(url, wait_max=5.0)
    book.answered("act-7")

    async def scenario() -> Decision | None:
        async def store_later() -> None:
            await asyncio.sleep(0.3)
            await asyncio.to_thread(ledger.append, Batch("test", 1, (answer(7, NOW, "alpha", 60),)))

        writer = asyncio.create_task(store_later())
        started = time.monotonic()
        decision = await book.check(budget, MODEL_CALL, NOW)
        assert time.monotonic() - started >= 0.25
        await writer
        return decision

    try:
        decision = asyncio.run(scenario())
        assert decision is not None and decision.details["tokens_spent"] == 60
        book.wait_max = 0.2
        book.answered("act-never")  # never stored: only the wait's bound can end this check
        assert asyncio.run(book.check(budget, MODEL_CALL, NOW)) is not None
    finally:
        book.close()
        ledger.close()


def test_an_ask_is_answered_once_through_the_folder(tmp_path: Path) -> None:
    """A held call is described in the asks folder; `answer` (what `flightlog approve` does) lets
    exactly that call through, both files are gone after, and answering it again (or an unknown
    id) is one clear error; an unanswered ask is refused when it expires."""
    book = AskBook(tmp_path)
    asked = Decision("ask", "review", "ask hosts=x")
    call = Call("http", "x.example", 443, "POST", "/pay?card=1234", "alpha", tool="pay", arguments={"n": 1})

    async def approve_while_waiting() -> Decision:
        pending = book.open(call, asked, timeout=10)
        assert [p.id for p in book.pending()] == [pending.id]
        assert book.pending()[0].path == "/pay"  # the query (secrets often travel there) is not shown
        assert book.pending()[0].arguments == '{"n": 1}'
        waiting = asyncio.create_task(book.wait(pending, asked, poll=0.02))
        await asyncio.sleep(0.1)
        book.answer(pending.id, True, by="operator")
        decision = await waiting
        with pytest.raises(AskError, match="is waiting for an answer"):
            book.answer(pending.id, True)
        return decision

    decision = asyncio.run(approve_while_waiting())
    assert decision.action == "allow" and "approved by operator" in decision.limit
    assert not list((tmp_path / "asks").iterdir())

    async def nobody_answers() -> Decision:
        pending = book.open(call, asked, timeout=0.2)
        return await book.wait(pending, asked, poll=0.02)

    expired = asyncio.run(nobody_answers())
    assert expired.action == "deny" and "no answer within 0.2 s" in expired.limit
    with pytest.raises(AskError):
        book.answer("deadbeef", False)
