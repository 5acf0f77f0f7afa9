"""`formats.first_token`: which server-sent event is a model's first token, per API shape, and the
incremental watch that finds the arrival of the chunk completing it (split anywhere, gzip-coded)."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from formats import sse
from formats.first_token import SCAN_MAX, Watch, is_content


def _event(data: object, kind: str = "message") -> sse.Event:
    return sse.Event(json.dumps(data).encode(), kind)


def _chat(delta: dict[str, object]) -> dict[str, object]:
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


OPENING = {
    "openai chat: role-only chunk": _event(_chat({"role": "assistant", "content": ""})),
    "openai chat: role, content null": _event(_chat({"role": "assistant", "content": None})),
    "openai chat: empty tool_calls": _event(_chat({"tool_calls": []})),
    "openai chat: usage-only chunk": _event({"choices": [], "usage": {"prompt_tokens": 3}}),
    "openai chat: finish chunk": _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    "openai completions: empty text": _event(
        {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}
    ),
    "openai chat: [DONE]": sse.Event(b"[DONE]"),
    "anthropic: message_start": _event({"type": "message_start", "message": {}}, "message_start"),
    "anthropic: content_block_start": _event(
        {"type": "content_block_start", "index": 0}, "content_block_start"
    ),
    "anthropic: ping": _event({"type": "ping"}, "ping"),
    "anthropic: message_delta": _event({"type": "message_delta", "delta": {}}, "message_delta"),
    "responses: created": _event({"type": "response.created"}, "response.created"),
    "responses: in_progress": _event({"type": "response.in_progress"}, "response.in_progress"),
    "responses: output_item.added": _event(
        {"type": "response.output_item.added"}, "response.output_item.added"
    ),
    "responses: created, no event name": _event({"type": "response.created"}),
    "not JSON": sse.Event(b"hello"),
    "a JSON array": sse.Event(b"[1, 2]"),
}
CONTENT = {
    "openai chat: content": _event(_chat({"content": "Hel"})),
    "openai chat: tool call": _event(_chat({"tool_calls": [{"index": 0, "function": {"name": "f"}}]})),
    "openai chat: refusal": _event(_chat({"refusal": "no"})),
    "openai-compatible: reasoning_content": _event(_chat({"reasoning_content": "hmm"})),
    "openai completions: text": _event(
        {"object": "text_completion", "choices": [{"index": 0, "text": "Hi"}]}
    ),
    "anthropic: content_block_delta": _event(
        {"type": "content_block_delta", "delta": {}}, "content_block_delta"
    ),
    "anthropic: delta without event name": _event({"type": "content_block_delta", "delta": {}}),
    "responses: output_text.delta": _event(
        {"type": "response.output_text.delta"}, "response.output_text.delta"
    ),
    "responses: function_call_arguments.delta": _event(
        {"type": "response.function_call_arguments.delta"}, "response.function_call_arguments.delta"
    ),
}


@pytest.mark.parametrize("name", list(OPENING))
def test_opening_events_are_not_a_token(name: str) -> None:
    """Events before a model's output (and ones that are not model output) are not its first token."""
    assert not is_content(OPENING[name])


@pytest.mark.parametrize("name", list(CONTENT))
def test_content_events_are_a_token(name: str) -> None:
    """The first event carrying text, a tool call, a refusal or reasoning is a token."""
    assert is_content(CONTENT[name])


STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    b"data: [DONE]\n\n"
)
CONTENT_ENDS = STREAM.index(b"\n\n", STREAM.index(b"Hi")) + 2
"""The byte after which the content event is complete (its closing blank line)."""


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_watch_gives_the_arrival_of_the_chunk_that_completes_the_first_content_event(cut: int) -> None:
    """Cut in two anywhere: the first token arrived with the chunk holding the content event's end."""
    watch = Watch()
    watch.feed(STREAM[:cut], 1.0)
    watch.feed(STREAM[cut:], 2.0)
    assert watch.at == (1.0 if cut >= CONTENT_ENDS else 2.0)


def test_watch_reads_through_a_content_coding() -> None:
    """A gzip-coded stream is read decoded, chunk by chunk."""
    coder = zlib.compressobj(wbits=31)
    opening, rest = STREAM[:60], STREAM[60:]
    first = coder.compress(opening) + coder.flush(zlib.Z_SYNC_FLUSH)
    watch = Watch("gzip")
    watch.feed(first, 1.0)
    assert watch.at is None and not watch.done
    watch.feed(coder.compress(rest) + coder.flush(), 2.0)
    assert watch.at == 2.0


def test_watch_without_content_finds_none_and_gives_up_past_its_bound() -> None:
    """A stream with no content event has no first token; past `SCAN_MAX` the watch stops reading."""
    watch = Watch()
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    for n in range(SCAN_MAX // len(role) + 2):
        watch.feed(role, float(n))
    assert watch.done and watch.at is None
    watch.feed(STREAM, 99.0)
    assert watch.at is None


@pytest.mark.parametrize("coding", ["compress", "gzip, bogus"])
def test_watch_of_a_coding_it_cannot_undo_finds_none(coding: str) -> None:
    """An unknown coding is not guessed at: no first token rather than a wrong one."""
    watch = Watch(coding)
    watch.feed(gzip.compress(STREAM), 1.0)
    assert watch.done and watch.at is None


@pytest.mark.parametrize(
    ("opening", "stream"),
    [
        (b"\x89PNG\r\n\x1a\n", False),
        (b'{"choices": []}', False),
        (b"d", True),
        (b"retry: 3000\n\n", True),
        (b"\xef\xbb\xbf\n: comment\n\n", True),
    ],
)
def test_watch_stops_at_first_bytes_that_are_not_an_event_stream(opening: bytes, stream: bool) -> None:
    """A body that does not open as an event stream (a download teed through, a JSON answer) is not
    read on; one that does, or cannot tell yet, is."""
    watch = Watch()
    watch.feed(opening, 1.0)
    assert watch.done is not stream
