"""The door's HTTP handler: the routes the proxy answers under flightlog.local."""

from __future__ import annotations

import json

from authority import tokens
from catalog.contracts import render_upstream
from door.http_face import Door
from storage.ledger import Ledger
from tests.dispatch.conftest import ROOT, SECRET, Factory
from tests.dispatch.upstreams import Received

CALL = json.dumps({"tool": "weather", "args": {"city": "Bern"}}).encode()
JSON = {"content-type": "application/json"}


def test_post_dispatch_with_bearer_token(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """POST /api/dispatch answers {ok, result, action_id}; the token is never recorded, its task is."""
    door = Door(make_dispatcher(ledger), render_upstream)
    token = tokens.mint(ROOT, ["task = T9"]).encode()
    headers = {
        "Host": "flightlog.local",
        "Authorization": f"Bearer {token}",
        "X-Flightlog-Agent": "a1",
        **JSON,
    }
    status, out_headers, body = door.handle("POST", "/api/dispatch", {}, headers, CALL)
    reply = json.loads(body)
    assert status == 200 and reply["ok"] and out_headers["content-type"] == "application/json"
    events = ledger.action(reply["action_id"])
    call = events[0]
    assert call.head.startswith(b"POST /api/dispatch HTTP/1.1\r\nHost: flightlog.local\r\n")
    assert token.encode() not in call.head and {e.task for e in events} == {"T9"} and call.agent == "a1"
    assert SECRET.encode() not in body


def test_token_in_the_query_and_dry_run(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """A link-sized token works as ?token=; ?dry_run=1 sends nothing; the token never reaches the Ledger."""
    door = Door(make_dispatcher(ledger), render_upstream)
    token = tokens.mint(ROOT, ["tools = weather"]).encode()
    status, _, body = door.handle("POST", "/api/dispatch", {"token": token, "dry_run": "1"}, JSON, CALL)
    reply = json.loads(body)
    assert status == 200 and reply["dry_run"] and upstream[1].requests == []
    call = ledger.action(reply["action_id"])[0]
    assert call.head == b"POST /api/dispatch?dry_run=1 HTTP/1.1\r\ncontent-type: application/json"
    assert token not in (call.url or "")
    assert call.url == f"flightlog:dispatch/http/weather?token={tokens.decode(token).identifier}"


def test_refusal_over_http_names_its_limit(ledger: Ledger, make_dispatcher: Factory) -> None:
    """A refused call answers 403 with {ok: false, refused: {limit, message}}."""
    door = Door(make_dispatcher(ledger), render_upstream)
    token = tokens.mint(ROOT, ["tools = rpc"]).encode()
    status, _, body = door.handle(
        "POST", "/api/dispatch", {}, {"authorization": f"Bearer {token}", **JSON}, CALL
    )
    assert status == 403 and json.loads(body)["refused"]["limit"] == "tools"
    status, _, body = door.handle(
        "POST", "/api/dispatch", {}, {"authorization": f"Bearer {token}", **JSON}, b"not json"
    )
    assert status == 400 and json.loads(body)["refused"]["limit"] == "call"
    assert door.handle("GET", "/api/dispatch", {}, {}, b"")[0] == 405


def test_join_routes(ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]) -> None:
    """uses/TOOL, task/TASK and trace/EVENT answer JSON from the Ledger and the Directory."""
    door = Door(make_dispatcher(ledger), render_upstream)
    token = tokens.mint(ROOT, ["task = T3", "uses <= 5"]).encode()
    _, _, body = door.handle("POST", "/api/dispatch", {"token": token}, JSON, CALL)
    action = json.loads(body)["action_id"]
    status, _, body = door.handle("GET", "/api/dispatch/uses/weather", {}, {}, b"")
    assert status == 200 and {e["action_id"] for e in json.loads(body)["events"]} == {action}
    status, _, body = door.handle("GET", "/api/join/task/T3", {}, {}, b"")
    assert status == 200 and len(json.loads(body)["events"]) == 4
    status, _, body = door.handle("GET", f"/api/dispatch/trace/{action}:upstream.0.request", {}, {}, b"")
    traced = json.loads(body)
    assert status == 200 and traced["mismatch"] is False and traced["checks"][0]["matches"]
    status, _, body = door.handle("GET", f"/api/dispatch/token/{token}", {}, {}, b"")
    assert json.loads(body)["uses"] == 1
    assert door.handle("GET", "/api/dispatch/trace/nope", {}, {}, b"")[0] == 400
    assert door.handle("GET", "/api/dispatch/other/x", {}, {}, b"")[0] == 404


def test_one_line_link_form(ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]) -> None:
    """GET /api/dispatch?tool=NAME&args=JSON&token=... is the same call (the contracts' `url` form)."""
    door = Door(make_dispatcher(ledger), render_upstream)
    token = tokens.mint(ROOT, ["tools = weather", "uses <= 1"]).encode()
    query = {"tool": "weather", "args": '{"city":"Bern"}', "token": token}
    status, _, body = door.handle("GET", "/api/dispatch", query, {}, b"")
    assert status == 200 and json.loads(body)["ok"] and len(upstream[1].requests) == 1
    status, _, body = door.handle("GET", "/api/dispatch", query, {}, b"")
    assert status == 403 and json.loads(body)["refused"]["limit"] == "uses"
