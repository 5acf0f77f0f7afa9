"""The live OTLP stream into a real Phoenix: `flightlog proxy --otlp-endpoint URL` with real SDK clients
(OpenAI, Anthropic) calling the local fake model server in two sessions gives one trace per session,
its model calls nested under the run's root, with token attributes; and the batch export of the same
Ledger sends the very same span tree (same ids, same parents) to a receiver."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from readback.export import export_otlp, plan
from readback.recorded import Selection
from recording.identity import Identity
from storage.ledger import open_ledger
from tests.mcp.support import SDK_SERVER, recorded, session_events
from tests.support.phoenix import phoenix
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import upstream

pytestmark = [
    pytest.mark.slow,  # run first on the xdist workers (tests/conftest.py)
    pytest.mark.timeout(900),  # a fresh machine builds Phoenix's venv on first use (`tests.support.phoenix`)
]

Tree = set[tuple[str, str, str | None, str]]
"""(trace id, span id, parent span id, name) of every span, ids in hex."""


@pytest.fixture(scope="module")
def phoenix_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One Phoenix for the module (it takes long to start): each test picks out its own spans."""
    with phoenix(tmp_path_factory.mktemp("phoenix")) as base:
        yield base


def _phoenix_spans(
    base: str, mine: Callable[[dict[str, Any]], bool], count: int, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """This test's spans in Phoenix once `count` have been ingested (it writes them asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        found: list[dict[str, Any]] = httpx.get(
            f"{base}/v1/projects/default/spans", params={"limit": 1000}, trust_env=False, timeout=10
        ).json()["data"]
        spans = [s for s in found if mine(s)]
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.3)


@contextmanager
def receiver() -> Iterator[tuple[str, list[Any]]]:
    """A plain OTLP/HTTP receiver decoding what it is sent: (base URL, the spans received)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            received.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}


async def _mcp_add(ledger_url: str, blobs_url: str) -> str:
    """The MCP SDK client calls the SDK server's `add` through `flightlog mcp-record`, filed under
    agent alpha's session s1: the tool the model asked for."""
    options = ("--agent", "alpha", "--session", "s1", "--ledger", ledger_url, "--blobs", blobs_url)
    command = recorded(SDK_SERVER, *options)
    params = StdioServerParameters(command=command[0], args=command[1:])
    with anyio.fail_after(60):
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            result = await session.call_tool("add", {"a": 2, "b": 3})
    return str(result.content[0].text)  # type: ignore[union-attr]


def _calls(proxy: LiveProxy, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session s1 (agent alpha): a chat call offering the tool `add`, which the model asks for; the
    MCP call of `add` (through `mcp-record`); the chat call with its result; a streamed chat call.
    Session s2 (agent beta): an Anthropic streamed message. Real SDKs through the proxy, named as
    `flightlog run` names them."""
    with monkeypatch.context() as env:
        for name, value in proxy.client_env(Identity(agent="alpha", session="s1")).items():
            env.setenv(name, value)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "add 2 and 3"}]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[ADD])
        assert first.choices[0].finish_reason == "tool_calls"
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        result = anyio.run(_mcp_add, proxy.ledger_url, proxy.blobs_url)
        messages += [
            first.choices[0].message.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": result},
        ]
        second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[ADD])
        assert second.choices[0].message.content == "The tool said: 5"
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "again"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello!"
    with monkeypatch.context() as env:
        for name, value in proxy.client_env(Identity(agent="beta", session="s2")).items():
            env.setenv(name, value)
        claude = anthropic.Anthropic(base_url=base, api_key="sk-ant-test", max_retries=0)
        with claude.messages.stream(
            model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as message_stream:
            assert message_stream.get_final_text() == "Hello!"


def test_a_live_proxy_streams_one_trace_per_session_into_phoenix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phoenix_base: str
) -> None:
    """Each session is one trace in Phoenix: the root `invoke_agent AGENT`, its model calls under it
    (`chat MODEL`, tokens, finish reasons, response id, with --otlp-content the conversation, which
    Phoenix shows as its LLM messages) and
    the MCP call of the tool a model call asked for under that model call; the batch export of the
    same Ledger sends the same tree, span for span."""
    home = tmp_path / "home"
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    base = phoenix_base
    with upstream() as up:
        proxy = start_proxy(home, ledger_url, args=("--otlp-endpoint", base, "--otlp-content"))
        try:
            _calls(proxy, up.base, monkeypatch)
            ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
            session_events(ledger)  # mcp-record's writer has committed the session's end
            ledger.close()
        finally:
            log = proxy.stop()
        assert "flightlog: streamed 7 otlp spans" in log, log
        spans = _phoenix_spans(base, lambda s: s["attributes"].get("session.id") in ("s1", "s2"), 7)
    assert len(spans) == 7, spans
    by_id = {s["context"]["span_id"]: s for s in spans}
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    assert len(by_trace) == 2
    shapes = set()
    conversations: set[tuple[str, str]] = set()
    for members in by_trace.values():
        (root,) = [s for s in members if not s["parent_id"]]
        assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert root["span_kind"] == "AGENT"  # Phoenix read it as an agent run
        tree = tuple(sorted((s["name"], by_id[s["parent_id"]]["name"]) for s in members if s["parent_id"]))
        shapes.add((root["name"], root["attributes"]["session.id"], tree))
        for child in members:
            attrs = child["attributes"]
            assert attrs["session.id"] == root["attributes"]["session.id"]
            if child["name"].startswith("chat "):
                assert by_id[child["parent_id"]] is root
                assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
                assert attrs["gen_ai.response.finish_reasons"] in (["stop"], ["end_turn"], ["tool_calls"])
                assert attrs["gen_ai.response.id"] in ("chatcmpl-test", "chatcmpl-tools", "msg_test")
                assert child["span_kind"] == "LLM"  # Phoenix counts its tokens as its own:
                assert attrs["llm.token_count.prompt"] == attrs["gen_ai.usage.input_tokens"]
                # --otlp-content: the conversation as the conventions' message attributes, which Phoenix
                # reads as its own LLM messages (turns, tool calls, tool results), not a raw body
                assert not child["events"]
                assert attrs["llm.input_messages.0.message.role"] == "user"
                assert attrs["llm.output_messages.0.message.role"] == "assistant"
                said = attrs.get("llm.output_messages.0.message.content") or attrs.get(
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name"
                )
                conversations.add((attrs["llm.input_messages.0.message.content"], said))
                if attrs.get("llm.input_messages.2.message.role"):
                    assert attrs["llm.input_messages.2.message.role"] == "tool"
                    assert attrs["llm.input_messages.2.message.content"] == "5"
            elif child["name"] == "tools/call add":
                assert attrs["gen_ai.tool.name"] == "add" and attrs["mcp.method.name"] == "tools/call"
                assert child["span_kind"] == "TOOL"
                assert by_id[child["parent_id"]]["attributes"]["gen_ai.response.finish_reasons"] == [
                    "tool_calls"
                ]
    assert conversations == {
        ("add 2 and 3", "add"),  # the first call: the model asked for the tool
        ("add 2 and 3", "The tool said: 5"),  # the second: the tool's result among its input
        ("again", "Hello!"),
        ("hi", "Hello!"),
    }
    assert shapes == {
        (
            "invoke_agent alpha",
            "s1",
            (
                ("chat gpt-4o-mini", "invoke_agent alpha"),
                ("chat gpt-4o-mini", "invoke_agent alpha"),
                ("chat gpt-4o-mini", "invoke_agent alpha"),
                ("tools/call add", "chat gpt-4o-mini"),
            ),
        ),
        ("invoke_agent beta", "s2", (("chat claude-haiku-4-5", "invoke_agent beta"),)),
    }
    live: Tree = {
        (s["context"]["trace_id"], s["context"]["span_id"], s["parent_id"] or None, s["name"]) for s in spans
    }
    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        with receiver() as (url, received):
            assert export_otlp(ledger, plan(ledger, Selection(), "otlp"), url) == 7
    finally:
        ledger.close()
    batch: Tree = {
        (s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex() or None, s.name) for s in received
    }
    assert batch == live


def test_recorded_exchanges_reach_phoenix_as_genai_and_http_spans(
    home: Path, tmp_path: Path, phoenix_base: str
) -> None:
    """`flightlog export --format otlp --endpoint URL`: an AI call becomes `chat MODEL` with gen_ai.*
    model and token counts, a plain GET an HTTP span with its status; each span carries the action id
    that leads back to its Ledger rows."""
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with upstream() as up:
        proxy = start_proxy(home, ledger_url)
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
                chat = client.post(
                    f"{up.base}/v1/chat/completions",
                    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                )
                plain = client.get(f"{up.base}/bytes/5")
        finally:
            proxy.stop()
    assert chat.status_code == plain.status_code == 200
    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        ids = plan(ledger, Selection(), "otlp")
        assert len(ids) == 2
        env = {**os.environ, "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": (home / "blobs").as_uri()}
        command = [sys.executable, "-m", "flightlog", "export", "--format", "otlp", "--no-progress"]
        base = phoenix_base
        done = subprocess.run([*command, "--endpoint", base], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert f"exported 2 actions as 2 otlp spans to {base}" in done.stderr
        spans = _phoenix_spans(base, lambda s: s["attributes"].get("flightlog.action_id") in ids, 2)
    finally:
        ledger.close()
    by_name = {span["name"]: span for span in spans}
    assert set(by_name) == {"chat gpt-4o-mini", "GET"}
    ai = by_name["chat gpt-4o-mini"]["attributes"]
    assert ai["gen_ai.request.model"] == "gpt-4o-mini"
    assert ai["gen_ai.operation.name"] == "chat"
    assert (ai["gen_ai.usage.input_tokens"], ai["gen_ai.usage.output_tokens"]) == (11, 7)
    assert ai["http.response.status_code"] == 200
    get = by_name["GET"]["attributes"]
    assert get["url.full"].endswith("/bytes/5")
    assert get["http.response.status_code"] == 200
    assert {ai["flightlog.action_id"], get["flightlog.action_id"]} == set(ids)


def test_a_receiver_that_is_down_costs_one_line_not_the_proxy(tmp_path: Path) -> None:
    """Nothing listens at the endpoint: the proxy records and answers as ever, the stream says once
    that spans wait, and at the end how many were not sent."""
    home = tmp_path / "home"
    with upstream() as up:
        proxy = start_proxy(
            home, f"sqlite:///{tmp_path / 'l.db'}", args=("--otlp-endpoint", "http://127.0.0.1:9")
        )
        try:
            with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
                for _ in range(3):
                    answer = client.post(
                        f"{up.base}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=10
                    )
                    assert answer.status_code == 200
                    time.sleep(0.6)  # a round of the stream between calls
        finally:
            log = proxy.stop()
    assert (
        log.count("OTLP spans wait: cannot reach the OTLP receiver at http://127.0.0.1:9/v1/traces") == 1
    ), log
    assert "flightlog: 3 otlp spans not sent" in log
