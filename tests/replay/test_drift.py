"""`flightlog diff`: what changed in an agent's behaviour between two recordings, and `--fail-on`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from readback.behaviour import Step, mcp_called, step
from readback.drift import compare, failures, parse_fail_on
from readback.errors import DriftError
from tests.replay.conftest import agent, flightlog
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

CHAT = "POST api.openai.com/v1/chat/completions"


def test_a_changed_tool_list_is_reported_and_fails_on_tools(home: Path, tmp_path: Path) -> None:
    """The same agent recorded twice, the second time offering one more tool: `diff` of the two
    sessions names the added tool, `--fail-on tools` exits 1; two identical runs (as Ledger files)
    pass `--fail-on any`; a recording that names nothing (a mistyped file, a session never
    recorded, words not understood) is refused in one line, not compared as an empty one."""
    with upstream() as up:
        env = {"AGENT_BASE_URL": f"{up.base}/v1"}
        assert flightlog(home, "run", "--session", "a", *agent(), env=env).code == 0
        assert (
            flightlog(home, "run", "--session", "b", *agent(), env={**env, "AGENT_EXTRA_TOOL": "1"}).code == 0
        )
        for name in ("one", "two"):
            ledger = {"FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / name}.db"}
            assert flightlog(home, "run", *agent(), env={**env, **ledger}).code == 0

    drift = flightlog(home, "diff", "session a", "session b", "--fail-on", "tools")
    assert drift.code == 1, drift.err
    assert "tools offered: get_weather -> get_time, get_weather" in drift.out
    assert "FAIL (--fail-on): tools changed" in drift.out

    as_json = flightlog(home, "diff", "session a", "session b", "--json")
    assert as_json.code == 0  # no --fail-on: a report, not a gate
    doc = json.loads(as_json.out)
    assert doc["tools_offered"]["added"] == ["get_time"]
    assert doc["tool_calls"] == {} and doc["requests"]["added"] == []
    assert doc["totals"]["a"]["requests"] == 2 and doc["totals"]["a"]["tokens_in"] == 80

    same = flightlog(home, "diff", str(tmp_path / "one.db"), str(tmp_path / "two.db"), "--fail-on", "any")
    assert same.code == 0, same.out + same.err
    assert "requests: 2 -> 2" in same.out

    bad = flightlog(home, "diff", "session a", "session b", "--fail-on", "vibes")
    assert bad.code == 1 and bad.err.strip().splitlines()[-1].startswith("flightlog: --fail-on 'vibes'")

    # A gate must not compare nothing: two of these mistyped (an empty recording each) passed it.
    typos = flightlog(home, "diff", str(tmp_path / "one.dbb"), str(tmp_path / "two.dbb"), "--fail-on", "any")
    assert (
        typos.code == 1
        and "one.dbb' is no Ledger file here, and no recorded exchange matches it" in typos.err
    ), typos.out
    refusals = {
        str(
            tmp_path / "one.dbb"
        ): "is no Ledger file here, and no recorded exchange matches it",  # a mistyped file reads as a host
        "twoo.db": "'twoo.db': no such Ledger file",
        "session zz": "did not understand 'zz' (no session of that name in the Ledger",  # read against it
        "session a frobnicate": "'session a frobnicate' is no Ledger file, URL or selection: did not",
    }
    for spec, said in refusals.items():
        gate = flightlog(home, "diff", "session a", spec, "--fail-on", "any")
        assert gate.code == 1, (spec, gate.out, gate.err)
        lines = gate.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("flightlog: ") and said in lines[0], (spec, gate.err)


def test_steps_read_tool_calls_from_streams_and_answers_and_mcp_calls() -> None:
    """Streamed OpenAI deltas name a call once; Anthropic `tool_use` blocks and MCP `tools/call` count;
    the tools offered are the request's, in every API's spelling."""
    first = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
    rest = {"index": 0, "function": {"arguments": "{}"}}
    sse = b"".join(
        b"data: " + json.dumps({"choices": [{"delta": {"tool_calls": [call]}}]}).encode() + b"\n\n"
        for call in (first, rest)
    )
    sse += b"data: [DONE]\n\n"
    offer = json.dumps(
        {"tools": [{"name": "search"}, {"type": "function", "function": {"name": "f"}}]}
    ).encode()
    chat = step("POST", "https://h/v1/chat/completions", offer, sse, "text/event-stream", {})
    assert chat.tool_calls == ("get_weather",) and chat.tools_offered == ("search", "f")
    anthropic = json.dumps({"content": [{"type": "text"}, {"type": "tool_use", "name": "search"}]}).encode()
    messages = step("POST", "https://h/v1/messages", b"{}", anthropic, "application/json", {})
    assert messages.tool_calls == ("search",)
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup"}}'
    assert mcp_called(rpc) == ("lookup",)
    assert step("POST", "https://h/mcp", rpc, b"", None, {}).mcp_calls == ("lookup",)


def test_compare_names_added_removed_reordered_and_totals() -> None:
    """A moved request is `reordered`, not added plus removed; a new one is added; a model change and
    token totals beyond a tolerance trip their rules."""
    a = [Step("GET x/a", tokens_in=100), Step(CHAT, model="m1", tokens_in=100), Step("GET x/b")]
    b = [
        Step(CHAT, model="m2", tokens_in=105),
        Step("GET x/a", tokens_in=100),
        Step("GET x/b"),
        Step("GET x/c"),
    ]
    drift = compare(a, b)
    assert drift.added == ["#4 GET x/c"] and drift.removed == []
    assert drift.reordered == [CHAT]
    assert drift.models == {"a": ["m1"], "b": ["m2"], "added": ["m2"], "removed": ["m1"]}
    assert failures(drift, parse_fail_on(["tokens:10%"])) == []
    assert failures(drift, parse_fail_on(["tokens:1%,model"])) == [
        "tokens 200 -> 205 (over 1%)",
        "model changed",
    ] or failures(drift, parse_fail_on(["tokens:1%,model"])) == [
        "model changed",
        "tokens 200 -> 205 (over 1%)",
    ]
    with pytest.raises(DriftError, match="only tokens and cost"):
        parse_fail_on(["tools:5%"])
