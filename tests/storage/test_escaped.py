"""The escaped text form is lossless and only used (and flagged) when a database could not hold the text."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from storage.escaped import escape, escape_event, needs_escape, original_bytes, unescape
from storage.events import Event


@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0xFFFF)))
def test_unescape_undoes_escape_for_every_string(text: str) -> None:
    """Backslashes, NUL, surrogate-escaped bytes and lone surrogates all read back exactly."""
    assert unescape(escape(text)) == text
    assert not needs_escape(escape(text))


@given(st.binary())
def test_the_original_bytes_of_a_decoded_path_come_back(raw: bytes) -> None:
    """A path mitmproxy decoded with surrogateescape is recovered byte for byte from its escaped form."""
    decoded = raw.decode("utf-8", "surrogateescape")
    assert original_bytes(escape(decoded)) == raw


def test_an_event_is_escaped_and_flagged_only_when_needed() -> None:
    """Ordinary text is left as it is (the same object); text with NUL or a surrogate is escaped in
    every text column and the event says so."""
    plain = Event("e", "a", "http.request", "out", datetime.now(UTC), url="http://h/a\\b")
    assert escape_event(plain) is plain
    odd = Event("e", "a", "http.request", "out", datetime.now(UTC), url="http://h/\udcff", agent="x\\y\x00")
    escaped = escape_event(odd)
    assert escaped.escaped and escaped.url == "http://h/\\xff" and escaped.agent == "x\\\\y\\x00"
    assert unescape(escaped.agent or "") == "x\\y\x00"
    accented = Event("e", "a", "http.request", "out", datetime.now(UTC), url="http://h/é", agent="ü")
    assert escape_event(accented) is accented  # not ASCII, yet nothing a database refuses
    nul = Event("e", "a", "http.request", "out", datetime.now(UTC), url="http://h/", host="h\x00")
    assert escape_event(nul).escaped and escape_event(nul).host == "h\\x00"
