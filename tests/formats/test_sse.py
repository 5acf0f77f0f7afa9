"""The one server-sent-events reader (`formats.sse`), pinned to the WHATWG event-stream rules.

Every line ending (LF, CRLF, bare CR, mixed), multi-line data, `event`/`id` fields, comments, a BOM,
fields without a colon or space, and a final event without its blank line; and the incremental form
fed the same stream cut at every byte offset reads exactly what the whole-body form reads.
"""

from __future__ import annotations

import pytest

from formats import sse
from formats.sse import Event

SAMPLE = (
    b"\xef\xbb\xbf: a comment, then a BOM-led stream\n"
    b"event: greeting\n"
    b"id: 1\n"
    b"data: hello\n"
    b"data:  two spaces keep one\n"
    b"\n"
    b"data\n"
    b"\n"
    b"retry: 3000\n"
    b"unknown: ignored\n"
    b'data:{"json":true}\n'
    b"\n"
    b"id: bad\0id\n"
    b"data: id with NUL ignored\n"
    b"\n"
    b"id\n"
    b"data: id reset\n"
    b"\n"
    b"\n"
    b"\n"
    b": only a comment\n"
    b"\n"
    b"event: end\n"
    b"data: [DONE]\n"
    b"\n"
    b"data: cut, never closed\n"
)
EXPECTED = [
    Event(b"hello\n two spaces keep one", "greeting", "1"),
    Event(b"", "message", "1"),
    Event(b'{"json":true}', "message", "1"),
    Event(b"id with NUL ignored", "message", "1"),
    Event(b"id reset", "message", ""),
    Event(b"[DONE]", "end", ""),
]
ENDINGS = {"LF": b"\n", "CRLF": b"\r\n", "CR": b"\r"}


def _spelled(ending: bytes) -> bytes:
    return SAMPLE.replace(b"\n", ending)


def _mixed() -> bytes:
    """Each line ends differently: LF, CRLF, CR in turn (an empty line after a CR never ends with a
    lone LF: CR then LF is one line end, CRLF, by the rules themselves)."""
    lines = SAMPLE.split(b"\n")
    out = b""
    for n, line in enumerate(lines[:-1]):
        ending = (b"\n", b"\r\n", b"\r")[n % 3]
        if not line and ending == b"\n" and out.endswith(b"\r"):
            ending = b"\r\n"
        out += line + ending
    return out + lines[-1]


STREAMS = {**{name: _spelled(e) for name, e in ENDINGS.items()}, "mixed": _mixed()}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_whole_body_reads_the_spec_events_with_every_line_ending(name: str) -> None:
    """Whatever the line endings, the same events: data joined with LF, one space dropped after the
    colon, `event` and `id` (kept across events, reset by an empty `id`, ignored with a NUL),
    comments and unknown fields ignored, blank lines without data dispatching nothing, and the last
    event, never closed by a blank line, discarded."""
    assert sse.events(STREAMS[name]) == EXPECTED


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_incremental_equals_whole_at_every_cut(name: str) -> None:
    """The stream cut in two at every byte offset (inside the BOM, between CR and LF, inside a field
    name) reads the same events as the whole body; fed byte by byte too."""
    body = STREAMS[name]
    for cut in range(len(body) + 1):
        reader = sse.Reader()
        got = reader.feed(body[:cut]) + reader.feed(body[cut:])
        assert got == EXPECTED, (name, cut)
        assert reader.unfinished  # it stopped inside the never-closed event
    reader = sse.Reader()
    assert [e for i in range(len(body)) for e in reader.feed(body[i : i + 1])] == EXPECTED


def test_an_event_is_dispatched_the_moment_its_blank_line_arrives() -> None:
    """A live stream's event is read without waiting for the next chunk, even when its blank line is
    a bare CR that a following LF could have extended."""
    reader = sse.Reader()
    assert reader.feed(b"data: a\r\r") == [Event(b"a")]
    assert reader.feed(b"\ndata: b\r") == []  # the LF belongs to the CR before it: no empty line
    assert reader.feed(b"\r") == [Event(b"b")]
    assert not reader.unfinished


def test_pending_counts_what_an_unclosed_event_holds() -> None:
    """`pending` is the bytes an unclosed event holds, so a caller can bound a stream's memory."""
    reader = sse.Reader()
    reader.feed(b"data: " + b"x" * 1000 + b"\ndata: yy")
    assert reader.pending >= 1000 and reader.unfinished
    reader.feed(b"\n\n")
    assert reader.pending == 0 and not reader.unfinished


def test_blocks_cut_at_each_event_and_keep_every_byte() -> None:
    """Raw event blocks, each with the blank line that closes it; the rest is the last piece."""
    body = b"data: 1\n\ndata: 2\r\n\r\n: comment\n\ndata: 3\r\rdata: 4\n\r\n\n\ndata: tail"
    chunks = sse.blocks(body)
    assert chunks == [
        b"data: 1\n\n",
        b"data: 2\r\n\r\n",
        b": comment\n\n",
        b"data: 3\r\r",
        b"data: 4\n\r\n",
        b"\n\ndata: tail",
    ]
    assert b"".join(chunks) == body
    assert sse.blocks(b"") == []
    for name, stream in STREAMS.items():
        pieces = sse.blocks(stream)
        assert b"".join(pieces) == stream, name
        read = [(e.data, e.type) for p in pieces for e in sse.events(p)]
        assert read == [(e.data, e.type) for e in EXPECTED], name  # no event spans two blocks


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b'{"a": 1}', "text/event-stream; charset=utf-8", True),
        (b"data: x\n\n", None, True),
        (b"  event: x\n", "application/json", True),
        (b": keep-alive\n\n", None, True),
        (b"\xef\xbb\xbfid: 1\n", None, True),
        (b'{"data": 1}', "application/json", False),
        (b"hello", "text/plain", False),
        (b"", None, False),
    ],
)
def test_looks_like(body: bytes, content_type: str | None, expected: bool) -> None:
    """A stream is known by its content type, or by opening with a field or a comment."""
    assert sse.looks_like(body, content_type) is expected
