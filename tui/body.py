"""How a payload is shown: pretty JSON, text, server-sent events chunk by chunk, or hex for binary.

Pure functions over bytes, so every view is tested without a terminal. What is shown is never what is
kept: the Ledger keeps the exact bytes (content coding included); a view undoes the content codings,
stacked ones too (`formats.codings`), for reading and says so in its note.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, Literal

from formats import codings, sse

Mode = Literal["auto", "text", "hex"]
MODES: Final[tuple[Mode, ...]] = ("auto", "text", "hex")
SHOW_MAX: Final = 256 * 1024
"""Bytes shown at most; a longer payload is cut in the view (never in the Ledger) with a note."""


@dataclass(frozen=True, slots=True)
class Body:
    """A payload made readable: `kind` says how, `chunks` holds one string per SSE event."""

    kind: Literal["json", "text", "sse", "hex", "image", "empty"]
    text: str
    note: str = ""
    chunks: tuple[str, ...] = ()


def header(head: bytes, name: str) -> str | None:
    """The first value of a header field in an exact head (start line, then `Name: value` lines)."""
    want = name.lower().encode()
    for line in head.split(b"\r\n")[1:]:
        key, sep, value = line.partition(b":")
        if sep and key.strip().lower() == want:
            return value.strip().decode("latin-1")
    return None


def start_line(head: bytes) -> str:
    return head.split(b"\r\n", 1)[0].decode("latin-1")


def decoded(data: bytes, encoding: str | None) -> tuple[bytes, str]:
    """The body with its content codings undone for reading, and a note saying so (or why not)."""
    read = codings.readable(data, encoding)
    kept = "the Ledger keeps the encoded bytes"
    if read.cut:
        return read.data, f"{', '.join(read.codings)}-decoded for reading, cut: {read.problem}; {kept}"
    if read.problem is not None:
        coding = (encoding or "").strip().lower()
        return data, f"content-encoding {coding} is shown as kept: it could not be undone ({read.problem})"
    if read.codings:
        return read.data, f"{', '.join(read.codings)}-decoded for reading; {kept}"
    return data, ""


def hexdump(data: bytes, width: int = 16) -> str:
    """Offset, hex bytes and printable ASCII, one line per `width` bytes."""
    lines = []
    for offset in range(0, len(data), width):
        row = data[offset : offset + width]
        hexes = " ".join(f"{b:02x}" for b in row).ljust(width * 3 - 1)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{offset:08x}  {hexes}  |{text}|")
    return "\n".join(lines)


def _pretty(text: str) -> str | None:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def sse_chunks(text: str) -> tuple[str, ...]:
    """Server-sent events, one chunk per event block (`formats.sse.blocks`), each `data:` JSON
    pretty-printed inside its event."""
    chunks = []
    for block in sse.blocks(text.encode()):
        lines = []
        for line in (raw.decode() for raw in sse.lines(block)):
            field, sep, value = line.partition(":")
            pretty = _pretty(value.strip()) if sep and field == "data" else None
            lines.append(f"data: {pretty}" if pretty is not None else line)
        text_block = "\n".join(lines).strip("\n")
        if text_block.strip():
            chunks.append(text_block)
    return tuple(chunks)


MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"RIFF", "image/webp"),
    (b"<svg", "image/svg+xml"),
)


def image_type(data: bytes, content_type: str | None) -> str | None:
    """The image type a body is, by its content-type or its first bytes; None when it is not an image."""
    declared = (content_type or "").split(";", 1)[0].strip().lower()
    if declared.startswith("image/"):
        return declared
    for magic, kind in MAGIC:
        if data.startswith(magic) and (kind != "image/webp" or data[8:12] == b"WEBP"):
            return kind
    return None


def render(data: bytes | None, head: bytes = b"", mode: Mode = "auto", *, hex_width: int = 16) -> Body:
    """Make a payload readable: `auto` picks SSE, JSON, text or hex; `text` and `hex` force a view."""
    if not data:
        return Body("empty", "", "no payload bytes")
    body, note = decoded(data, header(head, "content-encoding"))
    notes = [note] if note else []
    if len(body) > SHOW_MAX:
        notes.append(f"showing the first {SHOW_MAX:,} of {len(body):,} bytes")
        body = body[:SHOW_MAX]
    if mode == "hex":
        return Body("hex", hexdump(body, hex_width), "; ".join(notes))
    image = image_type(body, header(head, "content-type"))
    if mode == "auto" and image and image != "image/svg+xml":
        size = len(data) if not notes else len(body)
        return Body("image", f"{image}, {size:,} bytes (m: text, then hex)", "; ".join(notes))
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        if mode == "text":
            notes.append("not UTF-8: undecodable bytes shown as \ufffd")
            return Body("text", body.decode("utf-8", "replace"), "; ".join(notes))
        notes.append("binary (not UTF-8)")
        return Body("hex", hexdump(body, hex_width), "; ".join(notes))
    if mode == "text":
        return Body("text", text, "; ".join(notes))
    if sse.looks_like(body, header(head, "content-type")):
        chunks = sse_chunks(text)
        notes.append(f"{len(chunks)} server-sent events")
        return Body("sse", "\n\n".join(chunks), "; ".join(notes), chunks)
    pretty = _pretty(text)
    if pretty is not None:
        return Body("json", pretty, "; ".join(notes))
    return Body("text", text, "; ".join(notes))
