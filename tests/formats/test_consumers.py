"""Every reader of recorded bytes reads one stream alike, because they all use `formats`.

Before `formats`, five SSE readers disagreed (the browser's conversation did not know a bare CR, the
replay diff did not join multi-line data, ...), and the browser undid one content coding where the
recorder undid a stack. Here one Anthropic answer, and one MCP event stream, each spelled with every
line ending and content-encoded with a stack, go through every consumer: usage (the Ledger's
columns), the browser's conversation and body view, `flightlog diff`'s steps, the recorder's MCP
messages, the door's MCP answer and serve-replay's event chunks. All read the same thing.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

import brotli
import pytest

from door.upstream import _jsonrpc_answer
from formats import codings, sse
from formats.conversation import conversation
from formats.usage import Usage, extract_usage
from readback.behaviour import step
from recording.mcp.http_messages import Memory, derived, message_at
from storage.events import Event
from tui.body import render

ENDINGS = {"LF": b"\n", "CRLF": b"\r\n", "CR": b"\r"}
URL = "https://api.anthropic.com/v1/messages"
REQUEST = json.dumps({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}).encode()
ANTHROPIC = [
    ("message_start", {"type": "message_start", "message": {"model": "claude-x", "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "Hel"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "lo"}}),
    ("content_block_start", {"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "t1", "name": "get_weather"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Paris\"}"}}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
        "usage": {"output_tokens": 7}}),
    ("message_stop", {"type": "message_stop"}),
]  # fmt: skip


def _stream(ending: bytes) -> bytes:
    """The answer as Anthropic streams it, a comment first, each event's JSON split over two `data`
    lines (joined with LF, which JSON reads as whitespace)."""
    out = b": stream" + ending
    for kind, doc in ANTHROPIC:
        text = json.dumps(doc).encode()
        head, tail = text.split(b": ", 1)
        out += b"event: " + kind.encode() + ending
        out += b"data: " + head + b":" + ending + b"data: " + tail + ending
        out += ending
    return out


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_model_stream_reads_alike_everywhere(ending: str) -> None:
    """Usage, the conversation, the diff's step and the body view agree on one stream, whatever its
    line endings and with `br, gzip` stacked on it; serve-replay cuts it into its eight events."""
    plain = _stream(ENDINGS[ending])
    coded = gzip.compress(brotli.compress(plain))
    usage = extract_usage(URL, REQUEST, coded, "text/event-stream", "br, gzip")
    assert usage == Usage("anthropic", "claude-x", 15, 7, cache_read=5)
    assert usage is not None and usage.raw["cache_read_input_tokens"] == 5
    conv = conversation(URL, REQUEST, plain, "text/event-stream")
    assert conv is not None and conv.answer.text == "Hello" and conv.answer.complete
    assert [(c.name, json.loads(c.arguments)) for c in conv.answer.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert (conv.answer.tokens_in, conv.answer.tokens_out) == (usage.tokens_in, usage.tokens_out)
    diffed = step("POST", URL, REQUEST, codings.readable(coded, "br, gzip").data, "text/event-stream", {})
    assert diffed.tool_calls == ("get_weather",) and diffed.model == "claude-x"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: br, gzip\r\n\r\n"
    view = render(coded, head)
    assert view.kind == "sse" and len(view.chunks) == len(ANTHROPIC)  # the comment opens the first
    assert "br, gzip-decoded for reading" in view.note
    assert len(sse.blocks(plain)) == len(ANTHROPIC)


MCP = [
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}},
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "done"}]}},
]
REQUEST_HEAD = (
    b"POST /mcp HTTP/1.1\r\nhost: h\r\nmcp-session-id: S1\r\ncontent-type: application/json\r\n\r\n"
)
ANSWER_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: S1\r\n"
    b"content-encoding: gzip\r\n\r\n"
)
CALL = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}).encode()


def _mcp_stream(ending: bytes) -> bytes:
    return b"".join(
        b"event: message" + ending + b"data: " + json.dumps(m).encode() + ending + ending for m in MCP
    )


def _event(kind: str, head: bytes, body: bytes) -> Event:
    role = "request" if kind == "http.request" else "response"
    return Event(
        event_id=f"f1:{role}", action_id="f1", kind=kind, direction="out", at=datetime.now(UTC),
        url="http://h/mcp", method="POST", head=head, payload=body, payload_state="complete",
    )  # fmt: skip


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_an_mcp_stream_reads_alike_everywhere(ending: str) -> None:
    """The recorder's message events (and their read-back bytes) and the door's answer agree on a
    gzip-encoded MCP event stream, whatever its line endings."""
    plain = _mcp_stream(ENDINGS[ending])
    coded = gzip.compress(plain)
    memo, seq = Memory(), iter(range(1, 100))
    derived(_event("http.request", REQUEST_HEAD, CALL), lambda: CALL, lambda: next(seq), memo)
    made = derived(_event("http.response", ANSWER_HEAD, coded), lambda: coded, lambda: next(seq), memo)
    assert [e.kind for e in made] == ["mcp.notifications/progress", "mcp.tools/call.result"]
    assert [json.loads(message_at(coded, ANSWER_HEAD, n)) for n in (1, 2)] == MCP
    assert _jsonrpc_answer(plain, "text/event-stream", 1) == MCP[1]
