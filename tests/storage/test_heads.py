"""The one head type and parser every room uses: tolerant for what the Ledger kept, strict off the wire."""

from __future__ import annotations

import pytest

from storage.heads import END_OF_HEAD, Head, build_head, parse_head


def test_recorded_heads_are_read_tolerantly_and_lose_nothing() -> None:
    """Bare LFs, a trailing blank line and a line without a colon are read, not dropped or refused."""
    head = parse_head(b"HTTP/1.1 200\nX-A: 1\r\nbroken line\r\nx-a:  2 \r\n\r\n")
    assert head.start == (b"HTTP/1.1", b"200", b"")
    assert head.fields == ((b"X-A", b"1"), (b"broken line", b""), (b"x-a", b"2"))
    assert head.get(b"x-A") == b"1" and head.get_all(b"X-A") == [b"1", b"2"]
    assert head.get("X-A") == "1" and head.has("broken line") and not head.has("nope")
    assert parse_head(b"") == Head((b"", b"", b""), ())


def test_wire_heads_are_checked_strictly() -> None:
    """Read strictly, anything but CRLF `Name: value` lines after a start line is one ValueError."""
    for raw, reason in (
        (b"", "empty head"),
        (b"HTTP/1.1\r\n\r\n", "bad start line"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "bad header field"),
        (b"HTTP/1.1 200 OK\r\n Lead: x\r\n\r\n", "bad header field"),
    ):
        with pytest.raises(ValueError, match=reason):
            parse_head(raw, strict=True)
    assert parse_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", strict=True).fields == ((b"Host", b"a"),)


def test_build_is_the_inverse_of_parse() -> None:
    """A head split and joined again is the same bytes (order, case and duplicates kept)."""
    raw = b"POST /x?y=1 HTTP/1.1\r\nHost: h\r\nX-B: 1\r\nx-b: 2"
    head = parse_head(raw + END_OF_HEAD)
    assert build_head(head.start, head.fields) == raw
