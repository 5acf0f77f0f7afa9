"""The span tree from Ledger events, one row per event shape: which spans come out, under which
parent, in which trace, with which GenAI attributes (the pure part of the OTLP export and stream)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from readback.genai_spans import DETAILS_EVENT, SpanValue, ns
from readback.span_tree import SpanTree
from storage.events import StoredEvent

T0 = datetime(2026, 12, 6, 12, 0, 0, 123456, tzinfo=UTC)
CHAT = "https://api.openai.com/v1/chat/completions"
MESSAGES = "https://api.anthropic.com/v1/messages"
LOOKUP = "https://lookup.example.com/v1/find?q=x"


def event(kind: str, action: str, ms: float, *, role: str = "", **columns: Any) -> StoredEvent:
    """A stored event as the Ledger gives it back; `role` names its id (`ACTION:ROLE`)."""
    base: dict[str, Any] = {name: None for name in StoredEvent.__slots__}
    base.update(
        event_id=f"{action}:{role or kind}",
        action_id=action,
        kind=kind,
        direction="out",
        at=T0 + timedelta(milliseconds=ms),
        collector="test",
        seq=0,
        head=b"",
        payload_state="none",
        redacted=(),
        escaped=False,
        fingerprint="",
    )
    base.update(columns)
    return StoredEvent(**base)


def with_columns(e: StoredEvent, **extra: int) -> SimpleNamespace:
    """An event of a Ledger that has more columns than this checkout's `StoredEvent` (cache tokens)."""
    return SimpleNamespace(**({n: getattr(e, n) for n in StoredEvent.__slots__} | extra))


def exchange(action: str, ms: float, url: str, *, took: float = 100, **identity: Any) -> list[StoredEvent]:
    answer = {
        k: identity.pop(k) for k in list(identity) if k in ("status", "tokens_in", "tokens_out", "error")
    }
    return [
        event("http.request", action, ms, role="request", method="POST", url=url, **identity),
        event(
            "http.response",
            action,
            ms + took,
            role="response",
            last_byte_ms=took,
            **{"status": 200, **answer},
        ),
    ]


def door_attempts(action: str, attempts: list[tuple[float, int]], **identity: Any) -> list[StoredEvent]:
    """A door call's upstream exchanges (`ACTION:upstream.N.request` / `.response`), one pair per
    (start ms, status) attempt, each answered 10 ms after it left."""
    out = []
    for n, (ms, status) in enumerate(attempts):
        common = {"method": "GET", "url": LOOKUP, **identity}
        out.append(event("dispatch.upstream.request", action, ms, role=f"upstream.{n}.request", **common))
        out.append(
            event(
                "dispatch.upstream.response",
                action,
                ms + 10,
                role=f"upstream.{n}.response",
                status=status,
                **common,
            )
        )
    return out


OPENAI_ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 20},
            "completion_tokens_details": {"reasoning_tokens": 3},
        },
    }
).encode()
ANTHROPIC_STREAM = b"".join(
    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
    for e in (
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-sonnet-4-5",
                "usage": {
                    "input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 40,
                },
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "lookup"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    )
)
SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream"


@dataclass
class Row:
    events: list[Any]
    bodies: dict[str, bytes] = field(default_factory=dict)
    spans: list[tuple[str, str | None]] = field(default_factory=list)
    """(name, parent's name) of every span, in the order given."""
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    traces: int = 1


ROWS = {
    "openai chat in a session: root and chat span, response id, finish reason, cache and reasoning": Row(
        exchange("a1", 0, CHAT, session="s1", agent="alpha", model="gpt-4o-mini", tokens_in=30, tokens_out=7),
        {"a1:response": OPENAI_ANSWER},
        [("chat gpt-4o-mini", "invoke_agent alpha"), ("invoke_agent alpha", None)],
        {
            "chat gpt-4o-mini": {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.response.id": "chatcmpl-1",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.usage.input_tokens": 30,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.usage.cache_read.input_tokens": 20,
                "gen_ai.usage.reasoning.output_tokens": 3,
                "session.id": "s1",
            },
            "invoke_agent alpha": {
                "gen_ai.operation.name": "invoke_agent",
                "session.id": "s1",
                "flightlog.calls": 1,
            },
        },
    ),
    "anthropic stream asks for a tool; the door's call of it nests under that model call": Row(
        [
            *exchange("a1", 0, MESSAGES, session="s1", agent="alpha", model="claude-sonnet-4-5"),
            event(
                "dispatch.call",
                "d1",
                150,
                role="call",
                direction="in",
                tool="lookup",
                session="s1",
                agent="alpha",
            ),
            *door_attempts("d1", [(160, 503), (175, 200)], tool="lookup", session="s1", agent="alpha"),
            event("dispatch.reply", "d1", 200, role="reply", tool="lookup", session="s1", agent="alpha"),
            event(
                "dispatch.call",
                "d2",
                250,
                role="call",
                direction="in",
                tool="other",
                session="s1",
                agent="alpha",
            ),
            event("dispatch.refused", "d2", 251, role="refused", tool="other", session="s1", agent="alpha"),
        ],
        {"a1:response": ANTHROPIC_STREAM},
        [
            ("chat claude-sonnet-4-5", "invoke_agent alpha"),
            ("GET", "execute_tool lookup"),
            ("GET", "execute_tool lookup"),
            ("execute_tool lookup", "chat claude-sonnet-4-5"),
            ("execute_tool other", "invoke_agent alpha"),
            ("invoke_agent alpha", None),
        ],
        {
            "chat claude-sonnet-4-5": {
                "gen_ai.provider.name": "anthropic",
                "gen_ai.response.id": "msg_1",
                "gen_ai.response.finish_reasons": ("tool_use",),
                "gen_ai.usage.cache_read.input_tokens": 100,
                "gen_ai.usage.cache_creation.input_tokens": 40,
            },
            "execute_tool lookup": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
            "execute_tool other": {"error.type": "refused"},
        },
    ),
    "cache and reasoning columns, when the Ledger has them, win over the body": Row(
        [
            event("http.request", "a1", 0, role="request", url=CHAT, session="s1", model="gpt-4o-mini"),
            with_columns(
                event("http.response", "a1", 50, role="response", status=200),
                cache_read_tokens=11,
                cache_write_tokens=12,
                reasoning_tokens=13,
            ),
        ],
        {"a1:response": OPENAI_ANSWER},
        [("chat gpt-4o-mini", "invoke_agent"), ("invoke_agent", None)],
        {
            "chat gpt-4o-mini": {
                "gen_ai.usage.cache_read.input_tokens": 11,
                "gen_ai.usage.cache_creation.input_tokens": 12,
                "gen_ai.usage.reasoning.output_tokens": 13,
            }
        },
    ),
    "mcp tools/call over stdio (call and answer share the action) under the run": Row(
        [
            event(
                "mcp.tools/call", "mcp:S:call:c:1", 0, role="c", tool="search", agent="alpha", session="s1"
            ),
            event(
                "mcp.tools/call.result",
                "mcp:S:call:c:1",
                30,
                role="s",
                tool="search",
                agent="alpha",
                session="s1",
            ),
        ],
        spans=[("tools/call search", "invoke_agent alpha"), ("invoke_agent alpha", None)],
        attributes={"tools/call search": {"mcp.method.name": "tools/call", "gen_ai.tool.name": "search"}},
    ),
    "mcp over http: the answer on another stream still closes its call": Row(
        [
            event(
                "mcp.tools/call", "f1", 0, role="mcp:1", tool="search", parent="mcp:S:call:c:7", session="s1"
            ),
            event(
                "mcp.tools/call.result",
                "f2",
                40,
                role="mcp:1",
                tool="search",
                parent="mcp:S:call:c:7",
                session="s1",
            ),
        ],
        spans=[("tools/call search", "invoke_agent"), ("invoke_agent", None)],
    ),
    "a call filed under no name is a trace of its own, without a root": Row(
        exchange("a1", 0, "http://example.test/x") + exchange("a2", 5, "http://example.test/y"),
        spans=[("POST", None), ("POST", None)],
        attributes={"POST": {"http.response.status_code": 200, "server.address": "example.test"}},
        traces=2,
    ),
    "a 429 to a client is an error; a 404 the proxy's listener answered is not its fault": Row(
        [
            *exchange("a1", 0, CHAT, session="s1", model="m", status=429),
            event("http.request", "a2", 5, role="request", method="GET", direction="in", session="s1"),
            event("http.response", "a2", 6, role="response", direction="in", status=404, session="s1"),
        ],
        spans=[("chat m", "invoke_agent"), ("GET", "invoke_agent"), ("invoke_agent", None)],
        attributes={
            "chat m": {"error.type": "429", "http.response.status_code": 429},
            "GET": {"error.type": None, "http.response.status_code": 404},
        },
    ),
    "a request never answered is given at the end, as an error": Row(
        exchange("a1", 0, CHAT, session="s1", model="gpt-4o")[:1],
        spans=[("chat gpt-4o", "invoke_agent"), ("invoke_agent", None)],
        attributes={"chat gpt-4o": {"error.type": "no answer was recorded"}},
    ),
    "two sessions are two traces": Row(
        exchange("a1", 0, CHAT, session="s1", model="m") + exchange("a2", 1, CHAT, session="s2", model="m"),
        spans=[
            ("chat m", "invoke_agent"),
            ("chat m", "invoke_agent"),
            ("invoke_agent", None),
            ("invoke_agent", None),
        ],
        traces=2,
    ),
}


def _tree(row: Row, content: bool = False) -> list[SpanValue]:
    tree = SpanTree(lambda e: row.bodies.get(e.event_id, b""), content=content)
    return tree.add(row.events) + tree.finish()


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_event_shapes_become_nested_spans(row: Row) -> None:
    """Each shape gives exactly these spans, each under the named parent of its own trace, with the
    GenAI attributes its events and bodies say (and nothing made up when they do not)."""
    spans = _tree(row)
    by_id = {s.span_id: s for s in spans}
    got = [(s.name, by_id[s.parent_id].name if s.parent_id else None) for s in spans]
    assert got == row.spans
    for s in spans:
        if s.parent_id is not None:
            assert by_id[s.parent_id].trace_id == s.trace_id
        expected = row.attributes.get(s.name, {})
        attrs = dict(s.attributes)
        assert {k: attrs.get(k) for k in expected} == expected
    assert len({s.trace_id for s in spans}) == row.traces


def test_times_are_the_recorded_ones_in_nanoseconds() -> None:
    """A span starts at its request's recorded microsecond and ends at the answer's last byte; the root
    covers the run's first to last call."""
    events = exchange("a1", 0, CHAT, took=250.5, session="s1", model="m") + exchange(
        "a2", 1000, CHAT, took=10, session="s1", model="m"
    )
    spans = _tree(Row(events))
    first, second, root = spans
    assert first.start_ns == ns(T0) == 1796558400_123456000
    assert first.end_ns - first.start_ns == 250_500_000
    assert (root.start_ns, root.end_ns) == (first.start_ns, second.end_ns)


def test_content_is_opt_in() -> None:
    """Content reaches the spans only when asked: a model call's conversation as the conventions'
    message attributes, a tool's arguments and result as attributes; by default none of them, and
    no span carries any event."""
    events = [
        *exchange("a1", 0, CHAT, session="s1", model="m"),
        event("dispatch.call", "d1", 150, role="call", tool="t", session="s1"),
        event("dispatch.reply", "d1", 200, role="reply", tool="t", session="s1"),
    ]
    bodies = {
        "a1:request": b'{"messages": []}',
        "a1:response": OPENAI_ANSWER,
        "d1:call": b'{"a": 1}',
        "d1:reply": b"{}",
    }
    row = Row(events, bodies)
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}
    assert all(not s.events and not content_keys & dict(s.attributes).keys() for s in _tree(row))
    chat, tool, _root = _tree(row, content=True)
    assert not chat.events and not tool.events
    said = dict(chat.attributes)
    assert json.loads(str(said["gen_ai.input.messages"])) == []
    assert json.loads(str(said["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hi"}], "finish_reason": "stop"}
    ]
    assert {k: v for k, v in tool.attributes if k.startswith("gen_ai.tool.call.")} == {
        "gen_ai.tool.call.arguments": '{"a": 1}',
        "gen_ai.tool.call.result": "{}",
    }


def test_a_body_that_is_no_conversation_we_read_is_given_as_recorded() -> None:
    """A model API whose conversation `formats.conversation` does not read (embeddings): its bodies as
    recorded, in the details event, rather than nothing."""
    events = exchange("a1", 0, "https://api.openai.com/v1/embeddings", session="s1", model="m")
    bodies = {"a1:request": b'{"input": "x"}', "a1:response": b'{"data": []}'}
    embed, _root = _tree(Row(events, bodies), content=True)
    assert [(e.name, dict(e.attributes)) for e in embed.events] == [
        (DETAILS_EVENT, {"gen_ai.input.messages": '{"input": "x"}', "gen_ai.output.messages": '{"data": []}'})
    ]


def test_live_and_batch_orders_give_the_same_spans() -> None:
    """Events arriving one by one, the answer of a call in a later commit than its request, give the
    same spans as all at once (the live stream and the batch export build one tree)."""
    row = ROWS["anthropic stream asks for a tool; the door's call of it nests under that model call"]
    tree = SpanTree(lambda e: row.bodies.get(e.event_id, b""))
    one_by_one = [s for e in row.events for s in tree.add([e])] + tree.finish()
    assert one_by_one == _tree(row)


def test_a_live_root_waits_for_its_run_to_be_quiet() -> None:
    """`roots(quiet)` gives a run's root only once no call was added for that long, and again only
    when the run changed since."""
    clock = [0.0]
    tree = SpanTree(lambda e: b"", clock=lambda: clock[0])
    tree.add(exchange("a1", 0, CHAT, session="s1", model="m"))
    assert tree.roots(quiet=5) == []
    clock[0] = 6
    assert [s.name for s in tree.roots(quiet=5)] == ["invoke_agent"]
    assert tree.roots(quiet=5) == []


def test_live_a_tool_call_committed_before_the_answer_that_asked_for_it_still_nests_under_it() -> None:
    """Another writer (the door, `mcp-record`) may commit a tool call a round before the proxy commits
    the model answer that asked for it; held for one round, the tool span still goes under that model
    call, as in the batch, and the run's root waits for it."""
    row = ROWS["anthropic stream asks for a tool; the door's call of it nests under that model call"]
    request, answer, *door = row.events
    tree = SpanTree(lambda e: row.bodies.get(e.event_id, b""), hold=True)
    first = tree.add([request, *door])
    # both tool calls wait (no model call asked for them yet); the door's upstream attempts go at once:
    # their parent is the door call's span, whichever call asked for it
    assert [s.name for s in first] == ["GET", "GET"]
    assert tree.roots() == []
    second = tree.add([answer])
    names = {s.span_id: s.name for s in second}
    assert sorted((s.name, names.get(s.parent_id, "root")) for s in second) == [
        ("chat claude-sonnet-4-5", "root"),
        ("execute_tool lookup", "chat claude-sonnet-4-5"),
        ("execute_tool other", "root"),
    ]
    assert set(first + second + tree.finish()) == set(_tree(row))


def test_a_proxy_left_on_forgets_the_runs_quiet_longest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `RUNS_KEPT` runs whose roots were given, the quiet-longest is forgotten: a later call of it
    starts the run again (its root, same ids, counts from there), and memory stays bounded."""
    from readback import span_tree

    monkeypatch.setattr(span_tree, "RUNS_KEPT", 2)
    clock = [0.0]
    tree = SpanTree(lambda e: b"", clock=lambda: clock[0])
    for i, session in enumerate(("s1", "s2", "s3")):
        clock[0] = i
        tree.add(exchange(f"a{i}", i, CHAT, session=session, model="m"))
    first = {dict(s.attributes)["session.id"]: s for s in tree.roots()}
    clock[0] = 10
    assert len(tree.add(exchange("a9", 9, CHAT, session="s1", model="m"))) == 1
    (root,) = tree.roots()
    assert root.span_id == first["s1"].span_id and dict(root.attributes)["flightlog.calls"] == 1


@pytest.mark.parametrize("identity", [{"session": "s1", "agent": "alpha"}, {}], ids=["in a run", "in no run"])
def test_a_door_calls_upstream_attempts_are_client_spans_under_it(identity: dict[str, str]) -> None:
    """Each upstream exchange a door call made is a client span under the call's `execute_tool` span,
    in its trace (a run's, or the call's own), with its URL and status; they are not calls of the run
    (the root counts the door call once)."""
    events = [
        event("dispatch.call", "d1", 150, role="call", direction="in", tool="lookup", **identity),
        *door_attempts("d1", [(160, 503), (175, 200)], tool="lookup", **identity),
        event("dispatch.reply", "d1", 200, role="reply", tool="lookup", **identity),
    ]
    spans = _tree(Row(events))
    door = next(s for s in spans if s.name == "execute_tool lookup")
    attempts = [s for s in spans if s.name == "GET"]
    assert [(s.parent_id, s.trace_id, s.kind) for s in attempts] == [
        (door.span_id, door.trace_id, "client")
    ] * 2
    assert [dict(s.attributes)["http.response.status_code"] for s in attempts] == [503, 200]
    assert {dict(s.attributes)["url.full"] for s in attempts} == {LOOKUP}
    assert [(s.start_ns - door.start_ns) // 1_000_000 for s in attempts] == [10, 25]
    roots = [s for s in spans if s.name.startswith("invoke_agent")]
    assert [dict(r.attributes)["flightlog.calls"] for r in roots] == ([1] if identity else [])


MCP_FRAMES = {
    "a call and its content": (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}',
        b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"5"}],"isError":false}}',
        {"a": 2, "b": 3},
        [{"type": "text", "text": "5"}],
    ),
    "no arguments, a result without content": (
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"now"}}',
        b'{"jsonrpc":"2.0","id":4,"result":{"structuredContent":{"t":1}}}',
        {},
        {"structuredContent": {"t": 1}},
    ),
    "a JSON-RPC error": (
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"q":"?"}}}',
        b'{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"bad"}}',
        {"q": "?"},
        {"code": -32602, "message": "bad"},
    ),
}


@pytest.mark.parametrize("name", list(MCP_FRAMES))
def test_mcp_tool_content_is_the_tools_own_not_the_json_rpc_frame(name: str) -> None:
    """An MCP call's span shows `params.arguments` and the result's content (or the error): a
    receiver flattening them (Phoenix's `tool.parameters.*`) sees no `jsonrpc`, `method` or `id`."""
    from readback.genai_spans import mcp_arguments, mcp_result

    request, answer, arguments, result = MCP_FRAMES[name]
    assert json.loads(mcp_arguments(request)) == arguments
    assert json.loads(mcp_result(answer)) == result


def test_mcp_content_that_is_not_json_rpc_is_given_as_recorded() -> None:
    """Bytes that are not a JSON-RPC object are not guessed at: they go as recorded."""
    from readback.genai_spans import mcp_arguments, mcp_result

    assert mcp_arguments(b"not json") == "not json" and mcp_result(b'{"a": 1}') == '{"a": 1}'
