"""When a streamed model answer's first token came: the first server-sent event that carries content.

A stream's first bytes are not its first token: OpenAI's chat stream opens with a chunk naming only
the role, Anthropic's with `message_start` (and `content_block_start`, `ping`), the Responses API with
`response.created` and `response.in_progress`; the model's first words follow, sometimes long after.
The first token is the first event of the model's own output, per API shape:

- OpenAI chat (and OpenAI-compatible servers): a chunk whose choice `delta` holds non-empty `content`,
  `tool_calls`, `function_call`, `refusal` or reasoning text (`reasoning_content`, `reasoning`); the
  legacy completions API: a choice with non-empty `text`;
- Anthropic messages: `content_block_delta` (text, tool input, thinking);
- OpenAI Responses: an event typed `response.<...>.delta` (output text, function call arguments,
  refusal, reasoning), never `response.created`.

`Watch` is the incremental form, fed a stream's chunks as they arrived, each with its arrival time
(content codings undone, under a cap); it stops reading at the first content event, at first bytes
that are not an event stream, and after `SCAN_MAX` bytes without one. Pure: no clock, no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Final

from formats import codings, sse
from formats.errors import CodingError

SCAN_MAX: Final = 1024 * 1024
"""Decoded bytes read before giving up on finding a content event (no first token then)."""

_FIELDS: Final = (b"data:", b"event:", b"id:", b":", b"retry:")
_FIELD_MAX: Final = max(len(f) for f in _FIELDS)
_CHAT_DELTA_FIELDS: Final = (
    "content",
    "tool_calls",
    "function_call",
    "refusal",
    "reasoning_content",
    "reasoning",
)


def is_content(event: sse.Event) -> bool:
    """Whether this event carries the model's own output (a token), by the API shapes above."""
    if event.type == "content_block_delta":
        return True
    if event.type.startswith("response.") and event.type.endswith(".delta"):
        return True
    try:
        doc = json.loads(event.data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and _doc_is_content(doc)


def _doc_is_content(doc: dict[str, Any]) -> bool:
    kind = doc.get("type")
    if kind == "content_block_delta":  # Anthropic's type is in the data as well as the event name
        return True
    if isinstance(kind, str) and kind.startswith("response.") and kind.endswith(".delta"):
        return True
    choices = doc.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):  # the legacy completions API's chunk
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(name) for name in _CHAT_DELTA_FIELDS):
            return True
    return False


class Watch:
    """Finds the arrival time of a stream's first content event, chunk by chunk."""

    def __init__(self, content_encoding: str = "") -> None:
        self._reader = sse.Reader()
        self._decoder: codings.Decoder | None = None
        self._read = 0
        self._start = b""
        self._judged = False
        self.done = False
        """The first content event was found, or the watch gave up: further chunks are not read."""
        self.at: float | None = None
        """The arrival time of the chunk that completed the first content event (None: not found)."""
        try:
            steps = codings.parse(content_encoding or None)
        except CodingError:
            self.done = True  # an encoding we cannot undo: no first token rather than a wrong one
            return
        if steps:
            self._decoder = codings.Decoder(steps, cap=SCAN_MAX)

    def _is_stream(self, piece: bytes) -> bool:
        """Whether the stream, by its first bytes, is an event stream (yes until they can tell)."""
        if self._judged:
            return True
        self._start += piece
        lead = self._start.removeprefix(sse.BOM).lstrip()
        if len(lead) < _FIELD_MAX and any(f.startswith(lead) for f in _FIELDS):
            return True  # too few bytes yet to tell
        self._judged = True
        return lead.startswith(_FIELDS)

    def feed(self, chunk: bytes, at: float | None) -> None:
        """Read one chunk that arrived at `at` (epoch seconds; None when unknown)."""
        if self.done or not chunk:
            return
        try:
            pieces = list(self._decoder.feed(chunk)) if self._decoder is not None else [chunk]
        except CodingError:  # corrupt, or past the cap: no first token rather than a wrong one
            self.done = True
            return
        for piece in pieces:
            self._read += len(piece)
            if not self._is_stream(piece):
                self.done = True  # not an event stream (a download teed through): nothing to read
                return
            if any(is_content(e) for e in self._reader.feed(piece)):
                self.at, self.done = at, True
                return
        if self._read > SCAN_MAX:
            self.done = True
