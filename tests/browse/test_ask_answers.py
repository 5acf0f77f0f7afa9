"""Plain-words questions answered from a real Ledger (SQLite and PostgreSQL) holding known events: the
numbers each answer gives (tokens, spend, average and p95 latency, the last 3 errors, failed calls to
slack); and `flightlog ledger ask` printing them, its durations on a slowest list, a cut list saying so,
`--explain`, and `--since yesterday` accepted by the other commands (issue 43)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger
from storage.questions.answer import answer
from storage.questions.known_values import LedgerValues
from storage.questions.reading import ask
from tests.support.cli_main import Run, in_process

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
TODAY = datetime(2026, 11, 25, tzinfo=UTC)
YESTERDAY = TODAY - timedelta(days=1)


def _action(n: int, at: datetime, url: str, status: int, took_ms: float, **meta: Any) -> tuple[Event, Event]:
    """One exchange: its request, and its answer `took_ms` later carrying status, usage and cost."""
    host = url.split("/")[2]
    usage = {k: meta.pop(k) for k in ("tokens_in", "tokens_out", "cost_usd", "error") if k in meta}
    common: dict[str, Any] = {
        "action_id": f"a{n}",
        "collector": "t",
        "method": "POST",
        "url": url,
        "host": host,
    }
    request = Event(
        event_id=f"a{n}-req", kind="http.request", direction="out", at=at, seq=2 * n, **common, **meta
    )
    response = Event(
        event_id=f"a{n}-res",
        kind="http.response",
        direction="in",
        at=at + timedelta(milliseconds=took_ms),
        seq=2 * n + 1,
        status=status,
        last_byte_ms=took_ms,
        **common,
        **meta,
        **usage,
    )
    return request, response


OPENAI = "https://api.openai.com/v1/chat/completions"
ANTHROPIC = "https://api.anthropic.com/v1/messages"
SLACK = "https://api.slack.com/api/chat.postMessage"
GPT = {"agent": "alpha", "model": "gpt-4o"}
CLAUDE = {"agent": "beta", "model": "claude-sonnet-4-5"}
KNOWN_EVENTS = [
    *_action(
        1, TODAY + timedelta(hours=10), OPENAI, 200, 1000, tokens_in=100, tokens_out=20, cost_usd=0.01, **GPT
    ),
    *_action(
        2, TODAY + timedelta(hours=11), OPENAI, 200, 2000, tokens_in=200, tokens_out=40, cost_usd=0.02, **GPT
    ),
    *_action(3, TODAY + timedelta(hours=12), ANTHROPIC, 500, 4000, error="overloaded", **CLAUDE),
    *_action(
        4,
        YESTERDAY + timedelta(hours=9),
        ANTHROPIC,
        200,
        3000,
        tokens_in=300,
        tokens_out=60,
        cost_usd=0.03,
        **CLAUDE,
    ),
    *_action(5, YESTERDAY + timedelta(hours=10), SLACK, 500, 500, agent="alpha"),
    *_action(6, TODAY + timedelta(hours=13), SLACK, 200, 300, agent="alpha"),
    *_action(7, TODAY + timedelta(hours=15), OPENAI, 429, 100, **GPT),
    *_action(
        8, TODAY - timedelta(days=2), "https://api.github.com/repos/x", 404, 50, agent="beta", tool="GH_REPO"
    ),
]


@pytest.fixture
def known(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    """The known events on SQLite and on PostgreSQL."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    ledger.append(Batch("t", 1, tuple(KNOWN_EVENTS)))
    yield ledger
    ledger.close()


def answered(ledger: Ledger, question: str, limit: int = 100) -> dict[str, Any]:
    return answer(ledger.engine, ask(question, NOW, LedgerValues(ledger.engine)), limit)


def test_tokens_and_spend(known: Ledger) -> None:
    """'how many tokens did alpha use today', 'how much did we spend yesterday': the sums of those events."""
    tokens = answered(known, "how many tokens did alpha use today")["totals"]
    assert (tokens["tokens_in"], tokens["tokens_out"]) == (300, 60)
    assert answered(known, "how much did we spend yesterday")["totals"]["cost_usd"] == pytest.approx(0.03)


def test_average_and_p95_latency(known: Ledger) -> None:
    """Average latency by model is the mean of each model's answers; p95 today is the nearest rank."""
    reply = answered(known, "average latency by model")
    by_model = {s["key"]: s for s in reply["stats"]}
    assert reply["unit"] == "ms" and set(by_model) == {"gpt-4o", "claude-sonnet-4-5", None}
    assert by_model["gpt-4o"]["count"] == 3
    assert by_model["gpt-4o"]["avg"] == pytest.approx((1000 + 2000 + 100) / 3)
    assert by_model["claude-sonnet-4-5"]["avg"] == pytest.approx(3500)
    (today,) = answered(known, "p95 latency today")["stats"]
    assert (today["count"], today["p50"], today["p95"], today["max"]) == (5, 1000, 4000, 4000)


def test_errors_classes_and_names(known: Ledger) -> None:
    """'last 3 errors' are the three newest errors; '5xx errors this week' and 'failed calls to slack'
    are exactly the events with those statuses and that host."""
    last = answered(known, "last 3 errors")
    assert [e["event_id"] for e in last["events"]] == ["a7-res", "a3-res", "a5-res"]
    assert last["matched"] == 4
    five = answered(known, "show me 5xx errors this week")
    assert sorted(e["event_id"] for e in five["events"]) == ["a3-res", "a5-res"]
    slack = answered(known, "failed calls to slack")
    assert [e["event_id"] for e in slack["events"]] == ["a5-res"]
    assert slack["filter"] == {"host": "api.slack.com", "status": "errors"}


def test_function_words_are_not_values(known: Ledger) -> None:
    """'what did the agent do in the last hour' is every event of the last hour (before: agent=do)."""
    reply = answered(known, "what did the agent do in the last hour")
    assert sorted(e["event_id"] for e in reply["events"]) == ["a7-req", "a7-res"]


def test_the_ledgers_values_are_found_by_index_probes(known: Ledger) -> None:
    """A word names a value as typed, lower- or upper-cased; a host by a label; hosts are read in name
    order one probe each; what the Ledger does not hold names nothing."""
    values = LedgerValues(known.engine)
    assert values.hosts() == ["api.anthropic.com", "api.github.com", "api.openai.com", "api.slack.com"]
    assert values.matches("tool", "gh_repo") == ("GH_REPO",)
    assert values.matches("agent", "ALPHA") == ("alpha",)
    assert values.matches("host", "slack") == ("api.slack.com",)
    assert values.matches("host", "api") == tuple(values.hosts())
    assert values.matches("agent", "gamma") == () and values.matches("method", "POST") == ()
    assert values.matches("kind", "http.request") == ("http.request",)
    assert answered(known, "GH_REPO errors")["filter"] == {"tool": "GH_REPO", "status": "errors"}


@pytest.fixture
def flightlog(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Run]:
    """`flightlog ...` in process over the known events (SQLite), plus one event a minute old."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ledger = open_ledger(url, (tmp_path / "blobs").as_uri())
    recent = _action(9, datetime.now(UTC) - timedelta(minutes=1), OPENAI, 200, 700, **GPT)
    ledger.append(Batch("t", 1, (*KNOWN_EVENTS, *recent)))
    ledger.close()
    monkeypatch.setenv("FLIGHTLOG_LEDGER", url)
    monkeypatch.setenv("FLIGHTLOG_BLOBS", (tmp_path / "blobs").as_uri())

    return in_process(monkeypatch, capsys)


def test_cli_slowest_lists_show_their_durations(flightlog: Callable[..., Run]) -> None:
    """`ask slowest calls` leads each line with how long it took, slowest first."""
    out = flightlog("ledger", "ask", "top", "2", "slowest", "calls")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "read as: sort=slowest, events listed (a request and its answer are two), at most 2"
    assert "took=4,000ms  a3-res" in lines[1] and "took=3,000ms  a4-res" in lines[2]


def test_cli_cut_list_says_so(flightlog: Callable[..., Run]) -> None:
    """A list cut by --limit says how many it shows of how many."""
    out = flightlog("ledger", "ask", "calls", "by", "alpha", "--limit", "2")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 3  # the reading and two events
    assert out.stderr == "2 of 12 events shown; --limit N\n"


def test_cli_summary_table_and_explain(flightlog: Callable[..., Run]) -> None:
    """`ask average latency by model` prints a row per model; --explain prints the reading only."""
    out = flightlog("ledger", "ask", "average", "latency", "by", "model")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1] == "figures in ms"
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[3:]}
    assert rows["claude-sonnet-4-5"][1:3] == ["2", "3,500"]
    out = flightlog("ledger", "ask", "--explain", "failed", "calls", "to", "slack")
    reading = "read as: status=errors host=api.slack.com, events listed (a request and its answer are two)\n"
    assert (out.returncode, out.stdout) == (0, reading)
    js = json.loads(flightlog("ledger", "ask", "--explain", "--json", "p95", "latency").stdout)
    assert (js["view"], js["stat"], js["metric"]) == ("stats", "p95", "duration")


def test_cli_refuses_a_value_the_ledger_does_not_hold(flightlog: Callable[..., Run]) -> None:
    """`ask errors from agent gamma` is one line naming 'gamma', exit 1; quoted, it is asked anyway."""
    out = flightlog("ledger", "ask", "errors", "from", "agent", "gamma")
    assert out.returncode == 1 and out.stderr.startswith("flightlog: did not understand 'gamma' (no agent")
    assert out.stderr.count("\n") == 1
    out = flightlog("ledger", "ask", "errors", "from", "agent", '"gamma"')
    assert out.returncode == 0 and out.stderr == "no events match\n"


def test_since_yesterday_works_on_every_filter_option(flightlog: Callable[..., Run]) -> None:
    """`--since yesterday` (refused before by every command but `ask`) reads as a question does."""
    out = flightlog("ledger", "query", "--since", "yesterday", "--json")
    assert out.returncode == 0, out.stderr
    assert {e["event_id"] for e in json.loads(out.stdout)["events"]} == {"a9-req", "a9-res"}
    out = flightlog("ledger", "counts", "--since", "2 hours ago", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["events"] == 2
    out = flightlog("ledger", "query", "--since", "fortnight")
    assert out.returncode == 1 and out.stderr.startswith("flightlog: --since 'fortnight': not a time")
