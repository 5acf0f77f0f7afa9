"""How payloads are made readable: JSON, text, SSE chunk by chunk, hex (the view only)."""

from __future__ import annotations

import gzip

import brotli

from tui.body import SHOW_MAX, header, hexdump, render, sse_chunks

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-encoding: gzip\r\n\r\n"


def test_header_is_case_insensitive_and_skips_the_start_line() -> None:
    """Header fields are looked up by name whatever their case; the start line is not a field."""
    assert header(HEAD, "Content-Encoding") == "gzip"
    assert header(b"GET /a:b HTTP/1.1\r\n\r\n", "get /a") is None


def test_json_is_pretty_after_undoing_the_content_encoding() -> None:
    """A gzip-encoded JSON body is decoded for reading, pretty-printed, and the note says so."""
    body = render(gzip.compress(b'{"a": [1, 2]}'), HEAD)
    assert body.kind == "json"
    assert body.text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert "gzip-decoded for reading" in body.note
    head = HEAD.replace(b"gzip", b"br")
    assert render(brotli.compress(b"plain words"), head).text == "plain words"


def test_a_damaged_encoding_is_shown_as_kept() -> None:
    """Bytes that do not decode under their content-encoding are shown raw, with the reason."""
    body = render(b"\xff\x00not gzip", HEAD)
    assert body.kind == "hex" and "could not be undone" in body.note


def test_sse_is_split_into_events_with_json_pretty() -> None:
    """Server-sent events come out one chunk per event, their JSON data pretty-printed."""
    text = 'event: delta\ndata: {"x":1}\n\ndata: plain\r\n\r\ndata: [DONE]\n\n'
    assert sse_chunks(text) == ('event: delta\ndata: {\n  "x": 1\n}', "data: plain", "data: [DONE]")
    body = render(text.encode(), b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    assert body.kind == "sse" and len(body.chunks) == 3 and "3 server-sent events" in body.note


def test_binary_is_hex_and_modes_can_be_forced() -> None:
    """Non-UTF-8 bytes are a hex dump; `text` and `hex` force a view of any body."""
    assert hexdump(b"AB\x00") == "00000000  41 42 00" + " " * 39 + "  |AB.|"
    assert render(b"\xff\xfe", b"").kind == "hex"
    assert render(b"\xffok", b"", "text").text == "\ufffdok"
    assert render(b'{"a":1}', b"", "text").text == '{"a":1}'
    assert render(b'{"a":1}', b"", "hex").text.startswith("00000000  7b 22 61 22")
    assert render(None).kind == render(b"").kind == "empty"


def test_long_bodies_are_cut_in_the_view_only() -> None:
    """Past SHOW_MAX bytes the view is cut and says how much it shows."""
    body = render(b"x" * (SHOW_MAX + 10), b"")
    assert len(body.text) == SHOW_MAX
    assert f"showing the first {SHOW_MAX:,} of {SHOW_MAX + 10:,} bytes" in body.note


def test_images_are_shown_as_type_and_size() -> None:
    """An image reads as its type and size (by content-type or magic bytes); `hex` still shows its bytes."""
    from tests.browse.conversations import PNG

    shown = render(PNG, b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n")
    assert (shown.kind, shown.text) == ("image", "image/png, 208 bytes (m: text, then hex)")
    assert render(PNG).kind == "image"
    assert render(b"\xff\xd8\xff\xe0" + bytes(10)).text.startswith("image/jpeg, 14 bytes")
    assert render(PNG, mode="hex").text.startswith("00000000  89 50 4e 47")
