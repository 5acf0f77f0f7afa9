"""The Book: recorded exchanges answering live requests by the run's strategies, reported per request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from readback.match_book import Book
from readback.recorded import Selection, iter_exchanges, select_action_ids
from storage.ledger import Ledger, open_ledger
from tests.browse.recorded_exchanges import head, record

URL = "http://127.0.0.1:9/v1/chat/completions"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()


def put(ledger: Ledger, body: dict[str, object], answer: bytes) -> str:
    return record(
        ledger,
        method="POST",
        url=URL,
        request_head=head("POST /v1/chat/completions HTTP/1.1", [("Content-Type", "application/json")]),
        request_body=json.dumps(body).encode(),
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "application/json")]),
        response_body=answer,
    )


def book(ledger: Ledger, strategies: tuple[str, ...]) -> Book:
    ids = select_action_ids(ledger.engine, Selection())
    return Book(list(iter_exchanges(ledger.engine, ledger.events, ids)), ledger.payload, strategies)


def test_sequence_answers_repeats_in_recorded_order_and_without_it_the_first_every_time(
    ledger: Ledger,
) -> None:
    """A polled request recorded twice gets answer 1 then 2 with `sequence`, then misses; without
    `sequence` it gets the first recorded answer every time."""
    poll = {"model": "m", "messages": [{"role": "user", "content": "status?"}]}
    first, second = put(ledger, poll, b"1"), put(ledger, poll, b"2")
    raw = json.dumps(poll).encode()
    seq = book(ledger, ("exact", "sequence"))
    got = [seq.match("POST", URL, raw) for _ in range(3)]
    assert [x.action_id if x else None for x in got] == [first, second, None]
    assert [o.occurrence for o in seq.report.outcomes[:2]] == [1, 2]
    assert "every recorded answer to it was already used" in (seq.report.outcomes[2].miss or "")
    repeat = book(ledger, ("exact",))
    assert {repeat.match("POST", URL, raw).action_id for _ in range(3)} == {first}  # type: ignore[union-attr]


def test_normalized_answers_a_request_whose_ids_changed_and_names_the_rules(ledger: Ledger) -> None:
    """A second turn carrying a fresh tool-call id and `stream_options` misses `exact`, matches
    `normalized`, and its outcome names the rules that made it match; `finish` lists what was unused."""
    turn = {
        "model": "m",
        "messages": [{"role": "tool", "tool_call_id": "call_RECORDED123", "content": "18C"}],
    }
    action = put(ledger, turn, b"ok")
    unused = put(ledger, {"model": "m", "messages": []}, b"never")
    live = {**turn, "messages": [{**turn["messages"][0], "tool_call_id": "call_LIVE4567890"}]}  # type: ignore[dict-item]
    live["stream_options"] = {"include_usage": True}
    b = book(ledger, ("exact", "normalized", "sequence"))
    assert b.match("POST", URL, json.dumps(live).encode()).action_id == action  # type: ignore[union-attr]
    outcome = b.report.outcomes[0]
    assert outcome.strategy == "normalized" and outcome.rules == ("stream_options", "tool_call_id")
    assert [x for x in b.finish().unused if unused in x]
    strict = book(ledger, ("exact",))
    assert strict.match("POST", URL, json.dumps(live).encode()) is None
    line = strict.last_miss or ""
    assert 'body messages[0].tool_call_id is "call_RECORDED123" there, "call_LIVE4567890" here' in line
    assert "(and 1 more difference)" in line  # stream_options: exact bytes forgive nothing
