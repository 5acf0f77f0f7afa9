"""Server-sent events (`text/event-stream`), read by the WHATWG rules: one reader for every consumer.

Lines end with CRLF, LF or a bare CR; a line starting with `:` is a comment; `field: value` loses one
space after the colon; a line without a colon is a field with an empty value. `data` lines of one
event are joined with LF; `event` names its type (`message` when none); `id` sets the last event ID,
which later events keep until another `id` (one holding NUL is ignored); other fields are ignored. A
blank line dispatches the event, if it has data. A UTF-8 BOM at the very start is skipped. At the end
of the stream, an event not closed by a blank line is discarded, as the spec says (`Reader.unfinished`
tells a caller that the stream stopped inside one).

`Reader` is the incremental form, for a live stream fed chunk by chunk (a chunk may end anywhere,
even between the CR and LF of one line end); `events()` is the whole-body form, the same reader fed
once. `blocks()` cuts a body into the raw bytes of each event (for replaying a stream event by event,
or showing it so), by the same line rules. Pure functions over bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MEDIA_TYPE: Final = "text/event-stream"
BOM: Final = b"\xef\xbb\xbf"
_EOL: Final = re.compile(rb"\r\n|\r|\n")
_FIELDS: Final = (b"data:", b"event:", b"id:", b":")


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched event: its data (lines joined with LF), type and the last event ID."""

    data: bytes
    type: str = "message"
    id: str = ""


class Reader:
    """Reads an event stream incrementally: `feed(chunk)` gives the events that chunk completes."""

    def __init__(self) -> None:
        self._start = b""  # the first bytes, until they are known to be a BOM or not
        self._started = False
        self._cr = False  # the last chunk ended with CR: an LF opening the next one ends no line
        self._line: list[bytes] = []
        self._line_size = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._fields = False  # the current block has a line (so a blank line closes an event)
        self._type = ""
        self._id = ""

    @property
    def pending(self) -> int:
        """Bytes held for the event not yet closed (its data and its unfinished line)."""
        return self._data_size + self._line_size

    @property
    def unfinished(self) -> bool:
        """Whether the bytes so far stop inside an event (no blank line after its last line)."""
        return self._fields or self._line_size > 0 or bool(self._start)

    def feed(self, chunk: bytes) -> list[Event]:
        """The events this chunk completes, in order."""
        if not self._started:
            self._start += chunk
            if len(self._start) < len(BOM) and BOM.startswith(self._start):
                return []
            chunk, self._start, self._started = self._start.removeprefix(BOM), b"", True
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        out: list[Event] = []
        pos = 0
        for end in _EOL.finditer(chunk):
            line = chunk[pos : end.start()]
            if self._line:
                line = b"".join([*self._line, line])
                self._line, self._line_size = [], 0
            self._take(line, out)
            pos = end.end()
        if pos < len(chunk):
            self._line.append(chunk[pos:])
            self._line_size += len(chunk) - pos
        return out

    def _take(self, line: bytes, out: list[Event]) -> None:
        if not line:
            if self._data:
                out.append(Event(b"\n".join(self._data), self._type or "message", self._id))
            self._data, self._data_size, self._type, self._fields = [], 0, "", False
            return
        self._fields = True
        if line.startswith(b":"):
            return  # a comment
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._data_size += len(value) + 1
        elif name == b"event":
            self._type = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            self._id = value.decode("utf-8", "replace")


def events(body: bytes) -> list[Event]:
    """Every event of a whole stream (one not closed by a blank line at the end is discarded)."""
    return Reader().feed(body)


def lines(data: bytes) -> list[bytes]:
    """The lines of `data` by the stream's line ends (CRLF, LF, bare CR), the ends removed."""
    return _EOL.split(data)


def blocks(body: bytes) -> list[bytes]:
    """A stream cut into the raw bytes of each event block, each with the blank line that closes it
    (a blank line closing no block goes with the next one); the bytes after the last one, if any,
    are the last piece. Joined, the pieces are the body."""
    out: list[bytes] = []
    start = pos = 0
    content = False
    for end in _EOL.finditer(body):
        line = body[pos : end.start()]
        if line and line != BOM:
            content = True
        elif not line and content:
            out.append(body[start : end.end()])
            start, content = end.end(), False
        pos = end.end()
    if start < len(body):
        out.append(body[start:])
    return out


def declared(content_type: str | None) -> bool:
    """Whether a Content-Type value says `text/event-stream`."""
    return bool(content_type) and MEDIA_TYPE in (content_type or "").lower()


def looks_like(body: bytes, content_type: str | None = None) -> bool:
    """Whether a body is an event stream: its content type says so, or it opens with a field (for
    bodies recorded without one, or behind a server that mislabels them)."""
    return declared(content_type) or body.removeprefix(BOM).lstrip().startswith(_FIELDS)
