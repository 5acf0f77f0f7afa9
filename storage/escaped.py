"""A lossless escaped form for text the databases cannot hold as is (NUL, lone surrogates).

mitmproxy decodes a request line's bytes with `surrogateescape`, so a path with invalid UTF-8 reaches
us as a string with lone surrogates; a header value may carry NUL. Neither PostgreSQL (no NUL in
text, no surrogates in UTF-8) nor SQLite's UTF-8 encoder takes them. The exact bytes are kept in the
event's `head`; the text columns get this escaped form and the event's `escaped` flag says so:

- a backslash becomes two (`\\\\`), so the form reads back without ambiguity;
- NUL and each byte smuggled by `surrogateescape` (U+DC80..U+DCFF) become `\\xHH`;
- any other lone surrogate becomes `\\uHHHH`.

`unescape(escape(s)) == s` for every string (a property test holds it).
"""

from __future__ import annotations

import re
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # only named: `flightlog find` imports `needs_escape` without the event classes
    from storage.events import Event

_NEEDS: Final = re.compile("[\x00\ud800-\udfff]")
ESCAPABLE: Final = (
    "method", "url", "host", "tool", "session", "task", "turn", "agent", "model", "error", "parent",
)  # fmt: skip
"""The text columns a recorded exchange fills from what a client or upstream sent (ids are ours)."""
_escapable: Final = attrgetter(*ESCAPABLE)
"""`ESCAPABLE`'s values of an event, as a tuple, in one C call (the writer asks twice a request)."""
_ESCAPES: Final = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def needs_escape(text: str) -> bool:
    """Whether `text` holds a character neither database can store."""
    return _NEEDS.search(text) is not None


def _one(char: str) -> str:
    code = ord(char)
    if char == "\\":
        return "\\\\"
    if code == 0:
        return "\\x00"
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return char


def escape(text: str) -> str:
    """`text` in the escaped form (every backslash doubled: only use it when `needs_escape`)."""
    return "".join(_one(c) for c in text)


def _back(match: re.Match[str]) -> str:
    token = match.group(1)
    if token == "\\":
        return "\\"
    if token[0] == "x":
        code = int(token[1:], 16)
        return "\x00" if code == 0 else chr(0xDC00 + code)
    return chr(int(token[1:], 16))


def unescape(text: str) -> str:
    """The original string of an escaped form."""
    return _ESCAPES.sub(_back, text)


def original_bytes(text: str) -> bytes:
    """The bytes an escaped URL or header text stood for (surrogateescape undone)."""
    return unescape(text).encode("utf-8", "surrogateescape")


def escape_event(event: Event) -> Event:
    """`event` with every text column the databases cannot hold in the escaped form, flagged
    `escaped`; the same event (no copy) in the common case where nothing needs it."""
    values = _escapable(event)
    joined = "".join([v for v in values if v is not None])  # one search, not one per column
    if "\x00" not in joined and (joined.isascii() or not needs_escape(joined)):  # ASCII: no surrogate
        return event
    changed: dict[str, Any] = {
        name: escape(value) for name, value in zip(ESCAPABLE, values, strict=True) if value is not None
    }
    return replace(event, escaped=True, **changed)
