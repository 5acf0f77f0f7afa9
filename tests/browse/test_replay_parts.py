"""The plain parts under replay, serve-replay and export: heads, URLs, SSE chunks, diffs, matching."""

from __future__ import annotations

import gzip

from formats.codings import readable
from readback.answer_diff import Answer, body_lines, diff_answers
from readback.recorded import canonical_url
from readback.replay_player import Playback
from storage.heads import build_head, parse_head


def test_parse_head_keeps_case_order_and_duplicates_and_round_trips() -> None:
    """A head as capture writes it (ending in a blank line) splits into its start line and fields and
    joins back to the same bytes without the blank line."""
    raw = b"POST /v1/x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-Dup: one\r\nx-dup: two\r\nEmpty:\r\n\r\n"
    head = parse_head(raw)
    assert head.start == (b"POST", b"/v1/x?y=1", b"HTTP/1.1")
    assert head.fields == ((b"Host", b"a.test"), (b"X-Dup", b"one"), (b"x-dup", b"two"), (b"Empty", b""))
    assert head.get("x-DUP") == "one" and head.get("missing") is None
    assert build_head(head.start, head.fields) == raw.removesuffix(b"\r\n\r\n").replace(b"Empty:", b"Empty: ")
    status = parse_head(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0")
    assert status.start == (b"HTTP/1.1", b"404", b"Not Found")
    assert parse_head(b"").start == (b"", b"", b"")


def test_canonical_url_spells_one_url_one_way() -> None:
    assert canonical_url("HTTPS://API.Example.test:443/v1?x=1") == "https://api.example.test/v1?x=1"
    assert canonical_url("http://a.test:80") == "http://a.test/"
    assert canonical_url("http://a.test:8080/p#frag") == "http://a.test:8080/p"
    assert canonical_url("http://[::1]:9/x") == "http://[::1]:9/x"


def test_playback_head_frames_the_answer_as_chunked() -> None:
    playback = Playback(200, b"OK", ((b"Content-Type", b"text/event-stream"), (b"Content-Length", b"9")), ())
    assert playback.head() == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )


def test_bodies_are_diffed_decoded_and_json_pretty_printed() -> None:
    """gzip is removed before comparing; JSON key order and spacing do not count; binary is named."""
    assert readable(gzip.compress(b"hello"), "gzip").data == b"hello"
    assert readable(b"not gzip", "gzip").data == b"not gzip"
    assert body_lines(b'{"b":1,"a":2}') == ["{", '  "a": 2,', '  "b": 1', "}"]
    assert body_lines(b"\xff\x00")[0].startswith("<2 bytes of binary, sha256 ")
    old = Answer(200, "OK", ((b"A", b"1"),), b'{"x": 1, "y": 2}')
    new = Answer(200, "OK", ((b"A", b"1"),), b'{"y":2,"x":1}')
    assert diff_answers(old, new, "a1", "a2").same
    changed = diff_answers(old, Answer(None, "", (), b"", "ConnectError: refused"), "a1", "a2")
    assert changed.status == ("200 OK", "no answer (ConnectError: refused)")
    assert changed.render().splitlines()[0] == "status: 200 OK -> no answer (ConnectError: refused)"
