"""JSON-RPC / MCP framing (`formats.jsonrpc`): what one message is, and every message of a body
whatever its framing (one object, a batch, server-sent events with any line ending)."""

from __future__ import annotations

import json

import pytest

from formats import jsonrpc
from formats.jsonrpc import Message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p"}}}',
            Message("request", "tools/call", "7", "echo", progress_token='"p"'),
        ),
        (
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            Message("notification", "notifications/initialized"),
        ),
        (
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}',
            Message("notification", "notifications/cancelled", refers_to='"a"'),
        ),
        (b'{"jsonrpc":"2.0","id":"a","result":{}}', Message("answer", id='"a"')),
        (
            b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}',
            Message("answer", id="3", error="-32601: Method not found", code=-32601),
        ),
        (
            b'{"jsonrpc":"2.0","id":4,"result":{"isError":true,"content":[{"type":"text","text":"boom"}]}}',
            Message("answer", id="4", error="tool error: boom"),
        ),
        (b'{"jsonrpc":"1.0","id":1,"result":1}', Message("invalid", error="not a JSON-RPC 2.0 message")),
        (b'[{"jsonrpc":"2.0"}]', Message("invalid", error="not a JSON-RPC 2.0 message")),
        (
            b'{"jsonrpc":"2.0","id":[1],"result":1}',
            Message("invalid", error="a JSON-RPC answer whose id is neither a string nor a number"),
        ),
        (
            b'{"jsonrpc":"2.0","id":1}',
            Message("invalid", error="a JSON-RPC object with neither method, result nor error"),
        ),
    ],
)
def test_parse_classifies_every_shape(raw: bytes, expected: Message) -> None:
    """Requests, notifications (progress and cancellation linked), answers (errors and tool errors
    said), and each way of not being a message, with why."""
    assert jsonrpc.parse(raw) == expected


def test_parse_never_raises_on_junk() -> None:
    """Not JSON (or not UTF-8) is `invalid` with why, never an exception."""
    for junk in (b"", b"nope", b"\xff\xfe", b"{"):
        message = jsonrpc.parse(junk)
        assert (
            message.shape == "invalid" and message.error is not None and message.error.startswith("not JSON")
        )


def test_peek_reads_id_and_method_from_a_truncated_message() -> None:
    """A message too large to keep is still known by its first bytes."""
    assert jsonrpc.peek(b'{"jsonrpc":"2.0","id":12,"result":{"text":"xxxx') == Message("answer", id="12")
    assert jsonrpc.peek(b'{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"a') == Message(
        "request", "tools/call", '"q"'
    )
    assert jsonrpc.peek(b"garbage").shape == "invalid"


CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
NOTE = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}
RESULT = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}


def _events(*items: tuple[str | None, object], ending: bytes = b"\n") -> bytes:
    out = b""
    for kind, value in items:
        data = value if isinstance(value, bytes) else json.dumps(value).encode()
        out += (b"event: " + kind.encode() + ending if kind else b"") + b"data: " + data + ending + ending
    return out


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_messages_of_an_event_stream_with_any_line_ending(ending: bytes) -> None:
    """Each SSE event's message (a batch split into its elements, re-serialized), the `endpoint`
    event yielded as such, an event that is not JSON skipped; the same for every line ending."""
    body = _events(
        ("endpoint", b"/messages?session_id=s1"),
        (None, NOTE),
        ("message", [CALL, RESULT]),
        (None, b"not json"),
        (None, RESULT),
        ending=ending,
    )
    found = list(jsonrpc.messages(body, "text/event-stream"))
    assert [(where, value) for where, _, value in found] == [
        ("endpoint", None),
        ("message", NOTE),
        ("message", CALL),
        ("message", RESULT),
        ("message", RESULT),
    ]
    assert found[0][1] == b"/messages?session_id=s1"
    assert found[1][1] == json.dumps(NOTE).encode()  # a single message keeps its own bytes
    assert json.loads(found[2][1]) == CALL


def test_messages_of_a_json_body_one_or_a_batch() -> None:
    """A JSON body is one message or a batch; a body that is not JSON has none."""
    one = json.dumps(CALL).encode()
    assert list(jsonrpc.messages(one, "application/json")) == [("json", one, CALL)]
    batch = json.dumps([CALL, NOTE]).encode()
    assert [v for _, _, v in jsonrpc.messages(batch, "application/json")] == [CALL, NOTE]
    assert list(jsonrpc.messages(b"<html>", "text/html")) == []


def test_mcp_methods_are_known_by_their_first_segment() -> None:
    """Another JSON-RPC API through the proxy is not mistaken for MCP."""
    assert jsonrpc.looks_like_mcp_method("tools/call") and jsonrpc.looks_like_mcp_method("initialize")
    assert not jsonrpc.looks_like_mcp_method("eth_blockNumber") and not jsonrpc.looks_like_mcp_method(None)


def test_stdio_lines_cut_at_every_offset_and_bound_a_long_line() -> None:
    """MCP's stdio framing: lines numbered in order whatever the chunking; a line over the limit keeps
    only its first PEEK bytes (enough for `peek`) and its full size; what is left at the end is a line."""
    long = json.dumps({"jsonrpc": "2.0", "id": 9, "result": {"text": "x" * 10_000}}).encode()
    stream = json.dumps(CALL).encode() + b"\n" + long + b"\n" + b"tail without newline"
    expected = [(1, json.dumps(CALL).encode(), len(json.dumps(CALL))), (2, long[: jsonrpc.PEEK], len(long))]
    for cut in range(0, len(stream) + 1, 97):
        lines = jsonrpc.StdioLines(limit=8192)
        got = lines.feed(stream[:cut]) + lines.feed(stream[cut:])
        assert got == expected, cut
        assert lines.rest() == (3, b"tail without newline", 20)
        assert lines.rest() is None
    assert jsonrpc.peek(expected[1][1]) == Message("answer", id="9")
