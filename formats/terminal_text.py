"""Recorded text made safe for the operator's terminal: shown, never obeyed.

What the Ledger holds came from the traffic, and anyone may have written that: a page an agent read
can make it request a URL whose bytes hold escape sequences (mitmproxy keeps a request line as sent),
and a header names the agent. Printed as is, `ESC ] 0 ; ... BEL` set the terminal's title, `ESC [ 2 K`
and a carriage return erased the line being read and wrote another over it, and an 8-bit CSI (U+009B)
does the same on terminals that honour it; Rich, which draws the `counts` table, reads `[link=...]`
in a string as markup for a hyperlink. The text views therefore show each C0 and C1 control, DEL and
the Unicode line and paragraph separators as `\\xHH` (`\\uHHHH` for the two separators); the browser
hands Rich and Textual plain `Text` made from these (`tui.rich_text`). The form is for reading: a
backslash is left as it is, so `--json`, which escapes what JSON must and, here, the C1 controls as
well, gives the exact values. The command line and the browser both print through this module.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

DRIVES: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_DRIVES_IN_LINES: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_C1: Final = re.compile("[\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: object) -> str:
    """One value (a cell, a field) as text that cannot drive a terminal: tabs and line breaks
    included, so it stays on its line."""
    return DRIVES.sub(_escaped, str(value))


def shown_lines(text: str) -> str:
    """A block of lines (a head, a body, a title) as text that cannot drive a terminal: its tabs and
    newlines kept, every other control `shown`."""
    return _DRIVES_IN_LINES.sub(_escaped, text)


def json_text(value: Any, *, sort_keys: bool = True) -> str:
    """`value` as indented JSON that reads back exactly and holds no control a terminal obeys:
    `json.dumps` escapes C0 itself; C1, DEL and the separators become `\\u00HH` / `\\u20HH` here.
    A value JSON cannot hold (a datetime) is written as its `str`."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=sort_keys, default=str)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
