"""Recorded text made safe to print (`formats.terminal_text`): every control a terminal obeys shown
as an escape, the exact value kept in JSON."""

from __future__ import annotations

import json

import pytest

from formats.terminal_text import json_text, shown, shown_lines

DRIVING = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))] + ["\u2028", "\u2029"]


@pytest.mark.parametrize("char", DRIVING, ids=[f"U+{ord(c):04X}" for c in DRIVING])
def test_every_control_is_shown_never_obeyed(char: str) -> None:
    """C0, DEL, C1 and the line/paragraph separators come out as `\\xHH` or `\\uHHHH`; a value stays on
    one line; a block keeps only its tabs and newlines; JSON escapes them too and reads back exactly."""
    value = f"a{char}b"
    escaped = f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
    assert shown(value) == f"a{escaped}b"
    assert shown_lines(value) == (value if char in "\t\n" else f"a{escaped}b")
    text = json_text({"v": value})
    assert not any(c in text for c in DRIVING if c != "\n") and json.loads(text) == {"v": value}


def test_plain_text_and_backslashes_are_left_as_they_are() -> None:
    """What cannot drive a terminal is untouched, a backslash included (the form is for reading)."""
    assert shown("GET /v1/x?q=\\x1b café") == "GET /v1/x?q=\\x1b café"
    assert json_text({"b": 1, "a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}'
