"""The dispatch door's logic, in process, against local upstreams and a real Ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from authority import tokens
from recording.identity import Identity
from storage.ledger import Ledger, open_ledger
from tests.dispatch.conftest import NO_TOKEN, ROOT, SECRET, Factory
from tests.dispatch.upstreams import Received, mcp_upstream

CALL = {"tool": "weather", "args": {"city": "Zürich & Bern", "days": 2}}


def kinds(ledger: Ledger, action_id: str) -> list[str]:
    return [e.kind for e in ledger.action(action_id)]


def refusal(ledger: Ledger, action_id: str) -> str:
    """The `error` of the action's dispatch.refused event (it starts with the limit)."""
    [refused] = [e for e in ledger.action(action_id) if e.kind == "dispatch.refused"]
    assert refused.error is not None
    return refused.error


def all_recorded_bytes(ledger: Ledger, action_id: str) -> bytes:
    out = b""
    for e in ledger.action(action_id):
        out += e.head + (e.url or "").encode() + (e.error or "").encode()
        if e.payload_sha256:
            out += ledger.payload(e.payload_sha256)
    return out


def test_call_end_to_end_secret_reaches_upstream_never_the_ledger(
    tmp_path: Path, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """The upstream gets the secret's value in header, URL and body; the Ledger files only its name."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "blobs").as_uri())
    result = make_dispatcher(ledger).dispatch(CALL, identity=Identity(session="s1", agent="a1"))
    assert result.status == 200 and result.reply["ok"] is True, result.reply
    assert result.reply["result"]["target"].startswith("/v1/weather?q=Z%C3%BCrich%20%26%20Bern&key=")
    [(head, body)] = upstream[1].requests
    assert head.count(SECRET.encode()) == 2 and body.count(SECRET.encode()) == 1
    assert SECRET not in json.dumps(result.reply), "the reply must not hand the key to the agent"
    events = ledger.action(result.action_id)
    assert [e.kind for e in events] == [
        "dispatch.call",
        "dispatch.upstream.request",
        "dispatch.upstream.response",
        "dispatch.reply",
    ]
    assert {e.tool for e in events} == {"weather"} and {e.session for e in events} == {"s1"}
    request = events[1]
    assert b"[WEATHER_KEY]" in request.head and "WEATHER_KEY" in request.redacted
    assert request.host == "127.0.0.1" and "[WEATHER_KEY]" in (request.url or "")
    assert SECRET.encode() not in all_recorded_bytes(ledger, result.action_id)
    ledger.close()
    for path in [*tmp_path.glob("l.db*"), *(tmp_path / "blobs").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_recorded_upstream_request_is_the_bytes_sent_with_names(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """The Ledger's upstream request equals what the upstream received, value for name, byte for byte."""
    result = make_dispatcher(ledger).dispatch(CALL)
    [(head, body)] = upstream[1].requests
    request = ledger.action(result.action_id)[1]
    assert request.payload_sha256 is not None
    named = (head.replace(SECRET.encode(), b"[WEATHER_KEY]"), body.replace(SECRET.encode(), b"[WEATHER_KEY]"))
    assert (request.head, ledger.payload(request.payload_sha256)) == named


def test_dry_run_equals_the_real_call_byte_for_byte_with_names(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """A dry run sends nothing and shows exactly the bytes the real call then sends, names for values."""
    door = make_dispatcher(ledger)
    dry = door.dispatch(CALL, dry_run=True)
    assert dry.status == 200 and dry.reply["dry_run"] is True
    assert upstream[1].requests == [], "a dry run sends nothing"
    assert SECRET not in json.dumps(dry.reply) and "[WEATHER_KEY]" in json.dumps(dry.reply)
    assert kinds(ledger, dry.action_id) == ["dispatch.dry_run", "dispatch.reply"]
    door.dispatch(CALL)
    [(head, body)] = upstream[1].requests
    [shown] = dry.reply["wire"]
    assert shown["head"].encode() == head.replace(SECRET.encode(), b"[WEATHER_KEY]")
    assert shown["body"].encode() == body.replace(SECRET.encode(), b"[WEATHER_KEY]")


def test_bad_argument_is_a_400_naming_it(ledger: Ledger, make_dispatcher: Factory) -> None:
    """Arguments are validated against the row's schema; the refusal names the bad argument."""
    door = make_dispatcher(ledger)
    wrong = door.dispatch({"tool": "weather", "args": {"city": "x", "days": "two"}})
    assert wrong.status == 400 and wrong.reply["refused"]["argument"] == "days"
    missing = door.dispatch({"tool": "weather", "args": {}})
    assert missing.reply["refused"]["argument"] == "city"
    assert refusal(ledger, missing.action_id).startswith("args: ")
    unknown = door.dispatch({"tool": "nope", "args": {}})
    assert unknown.status == 404 and refusal(ledger, unknown.action_id).startswith("tool: ")


def mint(*caveats: str) -> str:
    return tokens.mint(ROOT, caveats).encode()


@pytest.mark.parametrize(
    ("caveat", "call", "door", "who", "limit"),
    [
        ("tools = rpc", CALL, "http", Identity(), "tools"),
        ("doors = cli", CALL, "http", Identity(), "doors"),
        ("expires < 2020-01-01T00:00:00Z", CALL, "http", Identity(), "expires"),
        ("bundles = flow", CALL, "http", Identity(), "bundles"),
        ("for = alice", CALL, "http", Identity(agent="mallory"), "for"),
    ],
)
def test_each_token_limit_refuses_and_is_recorded_by_name(
    ledger: Ledger,
    make_dispatcher: Factory,
    upstream: tuple[str, Received],
    caveat: str,
    call: dict[str, object],
    door: str,
    who: Identity,
    limit: str,
) -> None:
    """A call outside a token's limit is refused with 403; the Ledger's refusal event names the limit."""
    result = make_dispatcher(ledger).dispatch(call, token=mint(caveat), door=door, identity=who)
    assert result.status == 403 and result.reply["refused"]["limit"] == limit
    assert refusal(ledger, result.action_id).startswith(f"{limit}: ")
    assert upstream[1].requests == []


def test_uses_are_counted_in_the_ledger(ledger: Ledger, make_dispatcher: Factory) -> None:
    """`uses <= 2` allows two calls (refusals and dry runs do not count); the third is refused."""
    token = mint("uses <= 2")
    door = make_dispatcher(ledger)
    assert door.dispatch(CALL, token=token, dry_run=True).status == 200
    assert door.dispatch({"tool": "weather", "args": {}}, token=token).status == 400
    assert door.dispatch(CALL, token=token).status == 200
    assert door.dispatch(CALL, token=token).status == 200
    third = door.dispatch(CALL, token=token)
    assert third.status == 403 and refusal(ledger, third.action_id).startswith("uses: ")
    # a fresh Dispatcher (a restarted proxy) counts the same: the count lives in the Ledger
    assert make_dispatcher(ledger).dispatch(CALL, token=token).reply["refused"]["limit"] == "uses"


def test_task_token_files_every_call_under_its_task(ledger: Ledger, make_dispatcher: Factory) -> None:
    """A token bound to a task files all of its call's events under that task, whatever the caller says."""
    result = make_dispatcher(ledger).dispatch(CALL, token=mint("task = T7"), identity=Identity(task="other"))
    assert result.status == 200
    assert {e.task for e in ledger.action(result.action_id)} == {"T7"}


def test_attenuated_token_cannot_widen_its_parent(ledger: Ledger, make_dispatcher: Factory) -> None:
    """A child that lists more tools than its parent still cannot call what the parent does not allow."""
    parent = tokens.mint(ROOT, ["tools = weather"])
    child = tokens.attenuate(parent, ["tools = weather,rpc"], strict=False).encode()
    door = make_dispatcher(ledger)
    assert door.dispatch(CALL, token=child).status == 200
    wider = door.dispatch({"tool": "rpc", "args": {"target": "x"}}, token=child)
    assert wider.status == 403 and refusal(ledger, wider.action_id).startswith("tools: ")


def test_tampered_token_is_refused_and_recorded(ledger: Ledger, make_dispatcher: Factory) -> None:
    """Editing a token's caveats (here: raising its uses) breaks the signature: 401, limit 'signature'."""
    t = tokens.mint(ROOT, ["uses <= 1"])
    forged = tokens.Token(t.identifier, ("uses<=100",), t.signature).encode()
    result = make_dispatcher(ledger).dispatch(CALL, token=forged)
    assert result.status == 401 and refusal(ledger, result.action_id).startswith("signature: ")
    garbage = make_dispatcher(ledger).dispatch(CALL, token="flt_garbage")
    assert garbage.status == 401 and refusal(ledger, garbage.action_id).startswith("token: ")
    assert forged not in json.dumps([e.head.decode() for e in ledger.action(result.action_id)])


def test_network_doors_refuse_a_call_without_a_token(ledger: Ledger, make_dispatcher: Factory) -> None:
    """Deny by default: at the http and mcp doors a call without a token is refused by the 'token'
    limit (and recorded); only the operator's own door (cli) or the explicit open mode go without."""
    door = make_dispatcher(ledger)
    for name in ("http", "mcp"):
        result = door.dispatch(CALL, door=name, token=NO_TOKEN)
        assert result.status == 401 and refusal(ledger, result.action_id).startswith("token: ")
    assert door.dispatch(CALL, door="cli", token=NO_TOKEN).status == 200
    assert make_dispatcher(ledger, open_mode=True).dispatch(CALL, token=NO_TOKEN).status == 200


def test_unbound_secret_refuses(
    ledger: Ledger, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """A contract naming a secret with no value is refused before anything is sent, naming the secret."""
    result = make_dispatcher(ledger).dispatch({"tool": "unbound", "args": {}})
    assert result.status == 403 and result.reply["refused"]["secret"] == "MISSING_KEY"
    assert refusal(ledger, result.action_id).startswith("secret: ")
    assert upstream[1].requests == []


@pytest.mark.parametrize(
    ("call", "where"),
    [
        ({"tool": "rpc", "args": {"target": "https://api.old.example/v1"}}, "JSON-RPC body"),
        ({"tool": "shell", "args": {"url": "https://old.example/x"}}, "shell command"),
        (
            {
                "tool": "rpc",
                "args": {"target": "https://relay.example/go?u=https%253A%252F%252FOLD.example%252F"},
            },
            "relay",
        ),
    ],
)
def test_refused_host_anywhere_is_refused(
    ledger: Ledger,
    make_dispatcher: Factory,
    upstream: tuple[str, Received],
    call: dict[str, object],
    where: str,
) -> None:
    """A refused host hidden in a JSON-RPC body, a shell command or a percent-encoded relay URL refuses."""
    result = make_dispatcher(ledger).dispatch(call)
    assert result.status == 403, (where, result.reply)
    assert result.reply["refused"]["host"] == "old.example"
    assert refusal(ledger, result.action_id).startswith("refused_host: ")
    assert upstream[1].requests == []


def test_cli_contract_runs_only_when_opted_in(ledger: Ledger, make_dispatcher: Factory) -> None:
    """A CLI row with `cli: true` runs (argv, stdout and exit code recorded); one without is refused."""
    door = make_dispatcher(ledger)
    ran = door.dispatch({"tool": "echo_cli", "args": {"word": "hi there"}})
    assert ran.status == 200 and ran.reply["result"] == {"said": "hi there"}, ran.reply
    request, answer = ledger.action(ran.action_id)[1:3]
    assert request.head.startswith(b"CLI python3 -c") and request.method == "CLI"
    assert answer.status == 0 and answer.payload_sha256 is not None
    assert json.loads(ledger.payload(answer.payload_sha256)) == {"said": "hi there"}
    refused = door.dispatch({"tool": "no_opt_in", "args": {}})
    assert refused.status == 403 and refusal(ledger, refused.action_id).startswith("cli: ")


def test_cli_contract_times_out(ledger: Ledger, make_dispatcher: Factory) -> None:
    """A command that outlives the door's timeout is stopped; the answer event says so."""
    from catalog.tool import Tool

    slow = Tool.from_frontmatter(
        {
            "name": "slow",
            "description": "sleeps",
            "upstream": {"method": "CLI", "command": ["sleep", "5"]},
            "cli": True,
        }
    )
    door = make_dispatcher(ledger, cli_timeout=0.3)
    door.find_tool = {"slow": slow}.get
    result = door.dispatch({"tool": "slow", "args": {}})
    assert result.status == 502 and "timed out" in result.reply["error"]
    assert "timed out" in (ledger.action(result.action_id)[2].error or "")


def test_mcp_over_http_contract_is_executed(ledger: Ledger, make_dispatcher: Factory) -> None:
    """An MCP contract is run against a real MCP server over streamable HTTP; every exchange recorded."""
    from catalog.tool import Tool

    with mcp_upstream() as url:
        tool = Tool.from_frontmatter(
            {
                "name": "adder",
                "description": "Adds.",
                "args": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                },
                "upstream": {"method": "MCP", "server": {"url": url}, "tool": "add"},
            }
        )
        door = make_dispatcher(ledger)
        door.find_tool = {"adder": tool}.get
        result = door.dispatch({"tool": "adder", "args": {"a": 2, "b": 40}})
    assert result.status == 200 and result.reply["ok"], result.reply
    assert "42" in json.dumps(result.reply["result"])
    events = ledger.action(result.action_id)
    assert [e.kind for e in events].count("dispatch.upstream.request") == 3
    assert {e.tool for e in events} == {"adder"}


def test_ledger_down_refuses_the_call(
    pg_url: str, tmp_path: Path, make_dispatcher: Factory, upstream: tuple[str, Received]
) -> None:
    """If the call cannot be recorded it is not made: with the Ledger's tables gone the door answers 503."""
    import psycopg

    from tests.conftest import PG_ADMIN

    ledger = open_ledger(pg_url, (tmp_path / "blobs").as_uri(), retry_seconds=0)
    door = make_dispatcher(ledger)
    schema = pg_url.rsplit("search_path%3D", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    result = door.dispatch(CALL)
    assert result.status == 503 and result.reply["refused"]["limit"] == "ledger"
    assert upstream[1].requests == []
    ledger.close()


def test_expiry_is_checked_against_the_call_time(ledger: Ledger, make_dispatcher: Factory) -> None:
    """An `expires` caveat allows calls before the instant and refuses them after."""
    token = mint("expires < 2026-12-01T00:00:00Z")
    door = make_dispatcher(ledger)
    before = datetime(2026, 11, 30, tzinfo=UTC)
    assert door.dispatch(CALL, token=token, now=before).status == 200
    assert door.dispatch(CALL, token=token, now=before + timedelta(days=2)).status == 403


def test_uses_hold_under_concurrent_calls(ledger: Ledger, make_dispatcher: Factory) -> None:
    """Eight threads racing one `uses <= 3` token through one door: exactly three calls are made."""
    from concurrent.futures import ThreadPoolExecutor

    token = mint("uses <= 3")
    door = make_dispatcher(ledger)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: door.dispatch(CALL, token=token), range(8)))
    seen = sorted(
        (r.status, (r.reply.get("refused") or {}).get("limit", r.reply.get("error"))) for r in results
    )
    assert seen == [(200, None)] * 3 + [(403, "uses")] * 5, seen


def test_trace_of_an_mcp_call_matches_its_contract(ledger: Ledger, make_dispatcher: Factory) -> None:
    """The join's contract check also holds for the three requests of an MCP call (session id aside)."""
    from catalog import join
    from catalog.contracts import render_upstream
    from catalog.tool import Tool

    with mcp_upstream() as url:
        tool = Tool.from_frontmatter(
            {
                "name": "adder",
                "description": "Adds.",
                "args": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                },
                "upstream": {"method": "MCP", "server": {"url": url}, "tool": "add"},
            }
        )
        door = make_dispatcher(ledger)
        door.find_tool = {"adder": tool}.get
        result = door.dispatch({"tool": "adder", "args": {"a": 1, "b": 2}})
    found = join.trace(
        ledger.engine, ledger.payload, door.find_tool, render_upstream, f"{result.action_id}:reply"
    )
    assert len(found.checks) == 3 and not found.mismatch, found.checks
