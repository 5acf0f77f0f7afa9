"""The Ledger's questions end to end on SQLite and PostgreSQL: durations, order, totals, refusals,
counts by host and status, and the new read routes `/tally`, `/state` and `/screen` (issue 13).

Durations are computed from what every ledger holds: an answer's `at` minus the first `at` of its
action. The sample's answers took 850 ms; here they are spread out so order and bounds are visible.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from readback.ledger_routes import handle
from storage.event_reads import counts
from storage.events import Batch, Event
from storage.filters import Filter
from storage.ledger import Ledger, open_ledger
from storage.questions.answer import answer
from storage.questions.reading import ask
from tests.browse.sample import NOW, T0, sample_events

TOKEN = "t0ken"
TOOK_MS = {"a1": 850, "a2": 120, "a3": 2500, "a4": 4000, "a5": 30}


def events() -> list[Event]:
    """The sample, each answer moved to take `TOOK_MS`, plus one refusal and one writer overflow."""
    out = []
    starts = {e.action_id: e.at for e in sample_events() if e.kind == "http.request"}
    for e in sample_events():
        if e.kind == "http.response":
            e = dataclasses.replace(e, at=starts[e.action_id] + timedelta(milliseconds=TOOK_MS[e.action_id]))
        out.append(e)
    call = Event(
        "d1:call", "d1", "dispatch.call", "in", T0 + timedelta(hours=3), "test", 20, tool="STRIPE_CHARGE"
    )
    refused = dataclasses.replace(
        call, event_id="d1:refused", kind="dispatch.refused", direction="out", seq=21, error="uses: exhausted"
    )
    overflow = Event(
        "o1", "o1", "capture.overflow", "out", T0 + timedelta(hours=3), "test", 22, error="7 dropped"
    )
    return [*out, dataclasses.replace(call, at=call.at - timedelta(milliseconds=5)), refused, overflow]


@pytest.fixture
def timed(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    evs = events()
    ledger.append(Batch("test", 1, tuple(evs[:6])))
    ledger.append(Batch("test", 2, tuple(evs[6:])))
    yield ledger
    ledger.close()


def asked(ledger: Ledger, words: str) -> dict[str, Any]:
    return answer(ledger.engine, ask(words, NOW))


def ids(reply: dict[str, Any]) -> list[str]:
    return [e["event_id"] for e in reply["events"]]


def test_slowest_calls_come_slowest_first_with_their_durations(timed: Ledger) -> None:
    """ "slowest calls" orders answers by how long they took (answer at minus request at), each with
    duration_ms; before, the words were dropped and every event came back newest first."""
    reply = asked(timed, "slowest calls")
    assert ids(reply)[:4] == ["a4-response", "a3-response", "a1-response", "a2-response"]
    assert [e["duration_ms"] for e in reply["events"][:2]] == [4000, 2500]
    assert reply["next"] is None


def test_duration_bounds_keep_only_those_answers(timed: Ledger) -> None:
    """ "calls slower than 1 second" keeps the two answers over 1 s; "faster than 100ms" the quick ones."""
    assert sorted(ids(asked(timed, "calls slower than 1 second"))) == ["a3-response", "a4-response"]
    assert sorted(ids(asked(timed, "calls faster than 100ms"))) == ["a5-response", "d1:refused"]
    assert asked(timed, "how many calls slower than 1 second")["totals"]["events"] == 2


def test_a_bare_model_name_sums_its_cost(timed: Ledger) -> None:
    """ "how much did gpt-4o cost" answers one sum over gpt-4o's events (not every event)."""
    reply = asked(timed, "how much did gpt-4o cost")
    assert reply["view"] == "totals" and reply["filter"] == {"model": "gpt-4o"}
    assert reply["totals"]["cost_usd"] == pytest.approx(0.0015) and reply["totals"]["events"] == 4


def test_which_tools_and_refusals(timed: Ledger) -> None:
    """ "which tools were used" counts by tool; "refused calls" are the door's refusals only."""
    tools = {g["key"]: g["events"] for g in asked(timed, "which tools were used")["groups"]}
    assert tools == {"STRIPE_CHARGE": 2, "github.get_repo": 2, "stripe.webhook": 2, None: 7}
    assert ids(asked(timed, "refused calls")) == ["d1:refused"]


def test_counts_by_host_and_status(timed: Ledger) -> None:
    """The counted views take host and status too."""
    hosts = {g.key: g.events for g in counts(timed.engine, Filter(), "host")}
    assert hosts["api.openai.com"] == 4 and hosts["api.github.com"] == 2
    statuses = {g.key: g.events for g in counts(timed.engine, Filter(kind="http.response"), "status")}
    assert statuses == {"200": 3, "404": 1, "502": 1}


def route(ledger: Ledger, path: str, **query: str) -> tuple[int, Any]:
    status, _, body = handle(
        "GET", path, query, {"Authorization": f"Bearer {TOKEN}"}, b"", ledger=ledger, token=TOKEN
    )
    return status, json.loads(body)


def test_tally_sums_by_any_keys(timed: Ledger) -> None:
    """/api/ledger/tally sums events, tokens and cost per combination of keys (was 404)."""
    status, reply = route(timed, "/api/ledger/tally", by="model,host")
    assert status == 200 and reply["by"] == ["model", "host"]
    top = reply["groups"][0]
    assert top["key"] == {"model": "gpt-4o", "host": "api.openai.com"} and top["events"] == 4
    assert reply["events"] == len(events()) and reply["cost_usd"] == pytest.approx(0.0057)
    assert route(timed, "/api/ledger/tally")[0] == 400
    assert route(timed, "/api/ledger/tally", by="colour")[0] == 400


def test_state_names_each_collectors_position_and_drops(timed: Ledger) -> None:
    """/api/ledger/state: each collector's delivered position, last commit, lag and drops (was 404)."""
    status, reply = route(timed, "/api/ledger/state")
    assert status == 200
    (state,) = reply["collectors"]
    assert (state["collector"], state["position"], state["batches"], state["drops"]) == ("test", 2, 2, 7)
    assert state["last_commit"] is not None and state["lag_seconds"] >= 0


def test_screen_is_the_first_screen_as_json(timed: Ledger) -> None:
    """/api/ledger/screen: newest events under a question, their totals, kinds, collectors (was 404)."""
    status, reply = route(timed, "/api/ledger/screen", q="errors", limit="2")
    assert status == 200 and reply["filter"] == {"status": "errors"}
    assert len(reply["events"]) == 2 and reply["next"] is not None
    assert reply["totals"]["events"] == 4
    assert {k["key"] for k in reply["kinds"]} == {"http.response", "dispatch.refused", "capture.overflow"}
    assert reply["collectors"][0]["collector"] == "test"


def test_ask_route_refuses_words_it_does_not_understand(timed: Ledger) -> None:
    """A word not understood is a 400 naming it, never the answer without it."""
    status, reply = route(timed, "/api/ledger/ask", q="slow calls")
    assert status == 400 and reply["error"].startswith("did not understand 'slow': ")


def test_the_browser_shows_a_top_n_without_following_or_paging_it(timed: Ledger) -> None:
    """The browser's source reads "slowest calls" as one ordered page; asking it for the next page or
    for newer events answers nothing instead of the Ledger's refusal to page a top N."""
    from tui.source import LedgerSource

    source = LedgerSource(timed)
    slowest = ask("slowest calls", NOW).filter
    first = source.page(slowest, limit=2)
    assert [e.event_id for e in first] == ["a4-response", "a3-response"]
    cursor = (first[-1].at, first[-1].event_id)
    assert (
        source.page(slowest, limit=2, before=cursor) == []
        and source.newer(slowest, after=cursor, limit=2) == []
    )
