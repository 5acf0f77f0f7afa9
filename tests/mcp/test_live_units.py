"""The pure part of reading an open MCP event stream (`recording.mcp.live`): chunks cut
anywhere give each message once, numbered as the stream's end numbers them, with bounded memory."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

from recording.events import Processing
from recording.mcp.http_messages import READ_MAX, Memory, derived, message_at
from recording.mcp.live import live
from recording.records import StreamChunk
from recording.redaction.redact import Redactor
from storage.events import Event

GET_HEAD = b"GET /mcp HTTP/1.1\r\nhost: h\r\naccept: text/event-stream\r\nmcp-session-id: S1\r\n\r\n"
ANSWER_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nmcp-session-id: S1\r\n\r\n"


def _event(kind: str, head: bytes, body: bytes | None, method: str = "GET") -> Event:
    role = "request" if kind == "http.request" else "response"
    return Event(
        event_id=f"f1:{role}", action_id="f1", kind=kind, direction="out", at=datetime.now(UTC),
        url="http://h/mcp", method=method, head=head, payload=body or None,
        payload_state="complete" if body else "none",
    )  # fmt: skip


def _sse(*values: object) -> bytes:
    return b"".join(b"event: message\r\ndata: " + json.dumps(v).encode() + b"\r\n\r\n" for v in values)


MESSAGES = [
    {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://a"}},
    {"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "token sk-secret-99"}]}},
    {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
]


def _run(
    body: bytes, cut: int, memo: Memory, proc: Processing, method: str = "GET"
) -> tuple[list[Event], list[Event]]:
    seq = itertools.count(1)
    derived(_event("http.request", GET_HEAD, None, method), lambda: None, lambda: next(seq), memo)
    made: list[Event] = []
    for start in range(0, len(body), cut):
        made += live(proc, StreamChunk("f1", body[start : start + cut]), lambda: next(seq), memo)
    end = derived(_event("http.response", ANSWER_HEAD, body, method), lambda: body, lambda: next(seq), memo)
    return made, end


def test_chunks_cut_anywhere_give_each_message_once_with_its_own_bytes() -> None:
    """Whatever the chunk size (1 byte, mid-boundary, all at once), the three messages are made while
    the stream is open, each once, numbered 1..3 as at the stream's end (which makes none again);
    each carries the same bytes the stored stream holds at its place, secrets replaced."""
    body = _sse(*MESSAGES) + b": ping\r\n\r\n" + b'event: message\r\ndata: {"jsonrpc"'  # a cut-short tail
    proc = Processing(redactor=Redactor({"DEMO": "sk-secret-99"}))
    stored = proc.redactor.redact_body(body, None)[0] if proc.redactor else body
    for cut in (1, 7, 31, len(body)):
        made, end = _run(body, cut, Memory(), proc)
        assert end == []
        assert [e.event_id for e in made] == [f"f1:response:mcp:{n}" for n in (1, 2, 3)]
        assert [e.kind for e in made] == [
            "mcp.notifications/resources/updated", "mcp.result", "mcp.notifications/tools/list_changed",
        ]  # fmt: skip
        for n, e in enumerate(made, 1):
            assert e.payload_state == "complete" and e.payload == message_at(stored, ANSWER_HEAD, n)
        assert b"sk-secret-99" not in made[1].payload and made[1].redacted == ("DEMO",)  # type: ignore[operator]
        assert made[1].parent == "mcp:S1:call:c:4"


def test_the_end_makes_what_the_open_stream_did_not() -> None:
    """A message whose boundary arrives only with the stream's end is made there, as number 2."""
    body = _sse(*MESSAGES[:2])
    memo, proc = Memory(), Processing()
    seq = itertools.count(1)
    derived(_event("http.request", GET_HEAD, None), lambda: None, lambda: next(seq), memo)
    made = live(proc, StreamChunk("f1", body[:-2]), lambda: next(seq), memo)
    end = derived(_event("http.response", ANSWER_HEAD, body), lambda: body, lambda: next(seq), memo)
    assert [e.event_id for e in made] == ["f1:response:mcp:1"]
    assert [(e.event_id, e.payload_state) for e in end] == [("f1:response:mcp:2", "artifact")]
    assert memo.live == {}


def test_memory_is_bounded_and_other_streams_are_left_to_their_end() -> None:
    """An SSE event larger than the read limit is not held (the end reads the stream as before); a
    gzip-encoded stream and a POST's answer are not read while open; neither is a stream of a
    request that was not MCP."""
    memo, proc = Memory(), Processing()
    seq = itertools.count(1)
    derived(_event("http.request", GET_HEAD, None), lambda: None, lambda: next(seq), memo)
    assert live(proc, StreamChunk("f1", b"data: " + b"x" * (READ_MAX + 1)), lambda: next(seq), memo) == []
    assert memo.live["f1"].off and memo.live["f1"].reader.pending == 0
    assert live(proc, StreamChunk("f1", b"\n\n" + _sse(MESSAGES[0])), lambda: next(seq), memo) == []
    gz = Memory()
    derived(_event("http.request", GET_HEAD, None), lambda: None, lambda: next(seq), gz)
    assert live(proc, StreamChunk("f1", _sse(MESSAGES[0]), "gzip"), lambda: next(seq), gz) == []
    made, end = _run(_sse(*MESSAGES), 5, Memory(), proc, method="POST")
    assert made == [] and [e.payload_state for e in end] == ["artifact"] * 3
    assert live(proc, StreamChunk("other", _sse(MESSAGES[0])), lambda: next(seq), Memory()) == []


def test_a_get_stream_without_mcp_headers_is_read_live_whatever_its_accept_header_case() -> None:
    """The older HTTP+SSE transport opens `GET /sse` with no MCP header: an `Accept` naming
    text/event-stream (header names and values in any case) makes it a candidate whose messages
    are read while it is open; the same GET accepting anything else is never read."""
    head = b"GET /sse HTTP/1.1\r\nHost: h\r\nACCEPT: Text/Event-Stream\r\n\r\n"
    body = _sse(*MESSAGES)
    for accept, expected in ((head, 3), (head.replace(b"Text/Event-Stream", b"*/*"), 0)):
        memo, numbers = Memory(), itertools.count(1).__next__
        derived(_event("http.request", accept, None), lambda: None, numbers, memo)
        made = live(Processing(), StreamChunk("f1", body), numbers, memo)
        assert len(made) == expected, accept
