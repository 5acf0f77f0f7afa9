"""The pure parts: JSON-RPC classification, the wire form of a stdio record, and which HTTP exchanges
are read as MCP (and which are not)."""

from __future__ import annotations

import gzip
import itertools
import json
from datetime import UTC, datetime

from formats import jsonrpc as rpc
from recording.identity import Identity
from recording.mcp.http_messages import Memory, derived, message_at
from recording.records import StdioRecord, from_wire, to_wire
from storage.events import Event
from storage.kinds import mcp_kind


def test_classify_names_kind_tool_id_and_errors() -> None:
    """A tools/call is `mcp.tools/call` with its tool; answers take their call's method; JSON-RPC
    errors and `isError` results are errors; broken input is `mcp.invalid` with why."""
    call = rpc.parse(
        b'{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","_meta":{"progressToken":7}}}'
    )
    assert (mcp_kind(call.shape, call.method), call.tool, call.id, call.progress_token) == (
        "mcp.tools/call",
        "x",
        '"a-1"',
        "7",
    )
    ok = rpc.parse(b'{"jsonrpc":"2.0","id":"a-1","result":{"content":[]}}')
    assert mcp_kind(ok.shape, ok.method, "tools/call") == "mcp.tools/call.result" and ok.error is None
    assert mcp_kind(ok.shape, ok.method) == "mcp.result"
    err = rpc.parse(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}')
    assert err.error == "-32601: Method not found"
    tool_err = rpc.parse(
        b'{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}'
    )
    assert tool_err.error == "tool error: boom"
    assert rpc.parse(b"nope").shape == "invalid" and rpc.parse(b'{"id":1}').shape == "invalid"
    assert rpc.peek(b'{"jsonrpc":"2.0","id":12,"result":{"text":"xxxx').id == "12"


def test_a_stdio_record_survives_the_pipe_to_the_writer() -> None:
    """Every field of a `StdioRecord` comes back from its wire form, large data as a side buffer."""
    rec = StdioRecord(
        "s1", "srv --x", Identity(agent="a"), "server", 4, 1.5, b"y" * 10_000, 20_000, None, "n"
    )
    buffers: dict[int, tuple[int, bytes]] = {}
    wire = to_wire(rec, buffers)
    assert from_wire(wire, [b for _, b in buffers.values()]) == rec


def _event(kind: str, head: bytes, body: bytes, flow: str = "f1", url: str = "http://h/mcp") -> Event:
    role = "request" if kind == "http.request" else "response"
    return Event(
        event_id=f"{flow}:{role}", action_id=flow, kind=kind, direction="out", at=datetime.now(UTC), url=url,
        head=head, payload=body, payload_state="complete",
    )  # fmt: skip


def _derive(event: Event, memo: Memory) -> list[Event]:
    seq = itertools.count(1)
    payload = event.payload
    return derived(event, lambda: payload if isinstance(payload, bytes) else None, lambda: next(seq), memo)


def test_other_json_rpc_and_ai_streams_are_not_read_as_mcp() -> None:
    """An Ethereum-style JSON-RPC call and an OpenAI event stream give no message events."""
    memo = Memory()
    eth = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'
    assert (
        _derive(_event("http.request", b"POST / HTTP/1.1\r\ncontent-type: application/json", eth), memo) == []
    )
    sse = b'data: {"id":"c1","choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream"
    assert _derive(_event("http.response", head, sse, flow="f2"), memo) == []


def test_a_gzipped_batch_and_its_sse_answers_become_one_event_each_pointing_at_their_bytes() -> None:
    """A gzipped batch of two calls and an SSE answer with both results: four events, each call and
    result sharing `parent`, and `message_at` gives back each message from the exchange's payload."""
    memo = Memory()
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    req_head = b"POST /mcp HTTP/1.1\r\ncontent-encoding: gzip\r\nMcp-Session-Id: S9"
    request = _event("http.request", req_head, gzip.compress(json.dumps(batch).encode()))
    sent = _derive(request, memo)
    assert [(e.kind, e.tool, e.parent) for e in sent] == [
        ("mcp.tools/call", "a", "mcp:S9:call:c:1"),
        ("mcp.tools/list", None, "mcp:S9:call:c:2"),
    ]
    body = (
        b'event: message\ndata: {"jsonrpc":"2.0","id":2,"result":{"tools":[]}}\n\n'
        b'event: message\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}\n\n'
    )
    resp_head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream"
    got = _derive(_event("http.response", resp_head, body), memo)
    assert [(e.kind, e.tool, e.parent, e.error) for e in got] == [
        ("mcp.tools/list.result", None, "mcp:S9:call:c:2", None),
        ("mcp.tools/call.result", "a", "mcp:S9:call:c:1", "-1: no"),
    ]
    assert all(e.payload_state == "artifact" and e.action_id == "f1" for e in [*sent, *got])
    assert json.loads(message_at(request.payload, req_head, 2)) == batch[1]  # type: ignore[arg-type]
    assert json.loads(message_at(body, resp_head, 2))["error"]["message"] == "no"
    assert got[1].event_id == "f1:response:mcp:2"


def test_plain_words_about_mcp_calls() -> None:
    """'MCP calls' are the `mcp.tools/call` events; 'MCP tools' counts them by tool."""
    from storage.questions.reading import ask

    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    q = ask("which MCP tools did agent alpha call today", now=now)
    assert (q.filter.kind, q.filter.agent, q.group_by) == ("mcp.tools/call", "alpha", "tool")
    assert q.filter.since == datetime(2026, 12, 1, tzinfo=UTC)
    q = ask("counts by tool for MCP calls", now=now)
    assert (q.filter.kind, q.group_by) == ("mcp.tools/call", "tool")
