"""The join: tool to its uses, event to its contract (mismatch flagged), task to everything under it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from authority import tokens
from authority.targets import Located
from catalog import join
from catalog.contracts import render_upstream
from catalog.tool import Tool
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger
from tests.dispatch.conftest import ROOT, Factory, rows
from tests.dispatch.upstreams import Received

CALL = {"tool": "weather", "args": {"city": "Bern"}}


def trace(ledger: Ledger, base: str, event_id: str) -> join.Trace:
    return join.trace(ledger.engine, ledger.payload, rows(base).get, render_upstream, event_id)


def test_tool_uses_and_task_events(ledger: Ledger, make_dispatcher: Factory) -> None:
    """Every event of a tool is reachable from its name; every event of a task from the task."""
    door = make_dispatcher(ledger)
    first = door.dispatch(CALL, token=tokens.mint(ROOT, ["task = T1"]).encode())
    door.dispatch({"tool": "rpc", "args": {"target": "x"}})
    refused = door.dispatch({"tool": "weather", "args": {}}, token=tokens.mint(ROOT, ["task = T1"]).encode())
    uses = join.tool_uses(ledger.engine, "weather")
    assert {u["action_id"] for u in uses} == {first.action_id, refused.action_id}
    assert len(uses) == 4 + 2
    in_task = join.task_events(ledger.engine, "T1")
    assert {e["action_id"] for e in in_task} == {first.action_id, refused.action_id}
    assert any(e["kind"] == "dispatch.refused" and e["error"].startswith("args: ") for e in in_task)
    assert join.task_events(ledger.engine, "T2") == []


def test_trace_of_a_door_call_matches_its_contract(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """The runner's own recorded request is exactly what the contract produces for the recorded args."""
    result = make_dispatcher(ledger).dispatch({"tool": "weather", "args": {"city": "Zürich", "days": 3}})
    reply_event = ledger.action(result.action_id)[-1].event_id
    found = trace(ledger, upstream[0], reply_event)
    assert found.tool == "weather" and found.call == {
        "tool": "weather",
        "args": {"city": "Zürich", "days": 3},
    }
    assert len(found.checks) == 1 and found.checks[0].matches, found.checks
    assert not found.mismatch
    assert json.loads(json.dumps(found.as_dict(), default=str))["mismatch"] is False


def test_trace_flags_a_request_the_runner_did_not_make(
    ledger: Ledger, upstream: tuple[str, Received]
) -> None:
    """An action filed under a tool whose upstream request differs from the contract is flagged."""
    at = datetime.now(UTC)
    common = {"action_id": "forged1", "at": at, "tool": "weather", "collector": "elsewhere"}
    forged = (
        Event(
            event_id="forged1:call",
            kind="dispatch.call",
            direction="in",
            seq=0,
            payload=json.dumps(CALL).encode(),
            payload_state="complete",
            **common,  # type: ignore[arg-type]
        ),
        Event(
            event_id="forged1:upstream",
            kind="dispatch.upstream.request",
            direction="out",
            seq=1,
            head=b"POST /v1/weather?q=Bern&key=[WEATHER_KEY]&admin=1 HTTP/1.1\r\nHost: evil.example",
            **common,  # type: ignore[arg-type]
        ),
    )
    ledger.append(Batch("elsewhere", 1, forged))
    found = trace(ledger, upstream[0], "forged1:upstream")
    assert found.mismatch
    assert "head line 1" in found.checks[0].differs and "admin=1" in found.checks[0].differs


def test_trace_of_an_unknown_event_is_one_clear_error(ledger: Ledger, upstream: tuple[str, Received]) -> None:
    """Tracing an event the Ledger does not hold raises a JoinError naming it."""
    with pytest.raises(join.JoinError, match="nope"):
        trace(ledger, upstream[0], "nope")


def test_token_uses_on_postgres(pg_url: str, tmp_path: object, make_dispatcher: Factory) -> None:
    """Use counting is plain SQL that works the same on PostgreSQL."""
    ledger = open_ledger(pg_url, f"file://{tmp_path}/blobs")
    token = tokens.mint(ROOT, ["uses <= 1"])
    door = make_dispatcher(ledger)
    assert door.dispatch(CALL, token=token.encode()).status == 200
    assert join.token_uses(ledger.engine, token.identifier) == 1
    assert door.dispatch(CALL, token=token.encode()).reply["refused"]["limit"] == "uses"
    assert join.token_uses(ledger.engine, token.identifier) == 1
    ledger.close()


def test_token_uses_match_the_identifier_literally(ledger: Ledger, make_dispatcher: Factory) -> None:
    """`_` in an identifier is not a wildcard: a look-alike identifier's uses are not counted."""
    door = make_dispatcher(ledger)
    token = tokens.mint(ROOT, ["uses <= 5"], identifier="abXcd").encode()
    assert door.dispatch(CALL, token=token).status == 200
    assert join.token_uses(ledger.engine, "ab_cd") == 0
    assert join.token_uses(ledger.engine, "abXcd") == 1


def test_a_request_filed_under_a_tool_that_no_dispatch_made_is_flagged(
    ledger: Ledger, upstream: tuple[str, Received]
) -> None:
    """An exchange recorded by the proxy (or written by anyone) naming the tool, with no dispatch call
    in its action, is a mismatch: no runner made it (it used to pass with a note only)."""
    at = datetime.now(UTC)
    common = {"action_id": "captured1", "at": at, "tool": "weather", "collector": "proxy"}
    request = Event(
        event_id="captured1:request",
        kind="http.request",
        direction="out",
        seq=0,
        method="POST",
        head=b"POST /v1/weather?q=Bern HTTP/1.1\r\nHost: evil.example",
        **common,  # type: ignore[arg-type]
    )
    ledger.append(Batch("proxy", 1, (request,)))
    found = trace(ledger, upstream[0], "captured1:request")
    assert found.mismatch and found.checks[0].event_id == "captured1:request"
    assert "no dispatch" in found.checks[0].differs and "no runner made it" in found.note


def test_trace_reads_the_row_as_the_call_ran_it(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """A call made under one version of the row and traced after the row moved matches the version
    it ran under (`version(hash)`), and says which; without the version it is compared with today's."""
    base = upstream[0]
    before = rows(base)["weather"]
    door = make_dispatcher(ledger)
    door.locate = lambda name: Located(before, "tool", "weather.md", "v1hash") if name == "weather" else None
    result = door.dispatch(CALL)
    request = next(
        e.event_id for e in ledger.action(result.action_id) if e.kind == "dispatch.upstream.request"
    )
    moved = dict(before.upstream)  # type: ignore[arg-type]
    moved["url"] = str(moved["url"]).replace("/v1/", "/v2/")
    today = Tool.from_frontmatter({**before.frontmatter(), "upstream": moved})
    versions = {"v1hash": before}
    found = join.trace(
        ledger.engine, ledger.payload, {"weather": today}.get, render_upstream, request, versions.get
    )
    assert not found.mismatch and found.row_hash == "v1hash"
    unversioned = join.trace(ledger.engine, ledger.payload, {"weather": today}.get, render_upstream, request)
    assert unversioned.mismatch, "today's row is not the one the call ran"
