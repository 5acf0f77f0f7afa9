"""The head an event keeps: an HTTP start line and header fields, CRLF-separated, split and joined.

The Ledger stores every exchange's head as its exact bytes; capture, the relay, replay, export, the
door and the join all read or write that one format. Its type and its parser live here, the lowest
room all of them see, so there is one way to split a head (name case, order and duplicates kept)
and one way to put it back together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, overload

Fields = tuple[tuple[bytes, bytes], ...]
END_OF_HEAD: Final = b"\r\n\r\n"
"""A head on the wire (and as capture keeps it) ends in the blank line that closes it."""


@dataclass(frozen=True, slots=True)
class Head:
    """A head split apart: the start line's words (three, the missing ones empty) and its fields."""

    start: tuple[bytes, bytes, bytes]
    fields: Fields

    @overload
    def get(self, name: bytes) -> bytes | None: ...

    @overload
    def get(self, name: str) -> str | None: ...

    def get(self, name: bytes | str) -> bytes | str | None:
        """The first value of a field, by case-insensitive name: bytes for a bytes name, text (Latin-1,
        one character per byte) for a text name."""
        key = (name.encode("latin-1") if isinstance(name, str) else name).lower()
        for field_name, value in self.fields:
            if field_name.lower() == key:
                return value.decode("latin-1") if isinstance(name, str) else value
        return None

    def get_all(self, name: bytes) -> list[bytes]:
        """Every value of a field, in order."""
        lname = name.lower()
        return [value for key, value in self.fields if key.lower() == lname]

    def has(self, name: str) -> bool:
        return self.get(name) is not None


def parse_head(raw: bytes, *, strict: bool = False) -> Head:
    """Split head bytes (start line + header fields) into a `Head`.

    Read back from the Ledger (`strict=False`) it tolerates a trailing blank line and bare LF
    separators, and keeps a line without a colon as a name with an empty value, so nothing recorded
    silently disappears. Read off the wire (`strict=True`) anything but CRLF-separated `Name: value`
    lines after a start line of at least two words raises `ValueError` saying which line.
    """
    lines = raw.split(b"\r\n") if strict else [line.rstrip(b"\r") for line in raw.split(b"\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        if strict:
            raise ValueError("empty head")
        return Head((b"", b"", b""), ())
    words = lines[0].split(b" ", 2)
    if strict and len(words) < 2:
        raise ValueError(f"bad start line {lines[0][:80]!r}")
    words += [b""] * (3 - len(words))
    fields: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if strict and (not sep or not name or name != name.strip()):
            raise ValueError(f"bad header field {line[:80]!r}")
        if not line:
            break
        fields.append((name.strip(), value.strip()))
    return Head((words[0], words[1], words[2]), tuple(fields))


def build_head(start: Sequence[bytes], fields: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The inverse of `parse_head`: start line and `Name: value` lines joined by CRLF (no blank line)."""
    lines = [b" ".join(start).rstrip(b" ")]
    lines += [name + b": " + value for name, value in fields]
    return b"\r\n".join(lines)
