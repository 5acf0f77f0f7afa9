"""Recorded text made safe for the operator's terminal: shown, never obeyed.

What the Ledger holds came from the traffic, and anyone may have written that: a page an agent read
can make it request a URL whose bytes hold escape sequences (mitmproxy keeps a request line as sent),
and a header names the agent. Printed as is, `ESC ] 0 ; ... BEL` set the terminal's title, `ESC [ 2 K`
and a carriage return erased the line being read and wrote another over it, and an 8-bit CSI (U+009B)
does the same on terminals that honour it; Rich, which draws the `counts` table, reads `[link=...]`
in a string as markup for a hyperlink. The text views therefore show each C0 and C1 control, DEL and
the Unicode line and paragraph separators as `\\xHH` (`\\uHHHH` for the two separators), and hand
Rich and Textual plain `Text` (`cell`). The form is for reading: a backslash is left as it is, so
`--json`, which escapes what JSON must and, here, the C1 controls as well, gives the exact values.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.text import Text

_DRIVES: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_DRIVES_IN_LINES: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_C1: Final = re.compile("[\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: object) -> str:
    """One value (a cell, a field) as text that cannot drive a terminal: tabs and line breaks
    included, so it stays on its line."""
    return _DRIVES.sub(_escaped, str(value))


def shown_lines(text: str) -> str:
    """A block of lines (a head, a body, a title) as text that cannot drive a terminal: its tabs and
    newlines kept, every other control `shown`."""
    return _DRIVES_IN_LINES.sub(_escaped, text)


def cell(value: str | Text) -> Text:
    """A table cell that shows `value` as written: a string becomes plain `Text` (a `DataTable`
    reads a string as Rich markup, and `[/x]` in a URL stopped the browser with a MarkupError), and
    what could drive the terminal is `shown`. A `Text` of ours keeps its style."""
    from rich.text import Text  # deferred: the CLI prints through this module and starts without Rich

    if isinstance(value, Text):
        return Text(shown(value.plain), style=value.style) if _DRIVES.search(value.plain) else value
    return Text(shown(value))


def noted(note: str, style: str, value: str) -> Text:
    """A status line: our `note` in `style`, then `value` (an error's words, a typed question, which
    may quote recorded text) shown as written, never read as markup."""
    from rich.text import Text  # deferred, as in `cell`

    return Text.assemble((note, style), shown(value))


def json_text(value: Any, *, sort_keys: bool = True) -> str:
    """`value` as indented JSON that reads back exactly and holds no control a terminal obeys:
    `json.dumps` escapes C0 itself; C1, DEL and the separators become `\\u00HH` / `\\u20HH` here.
    A value JSON cannot hold (a datetime) is written as its `str`."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=sort_keys, default=str)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
