"""How a compiled section is laid out in bytes, so that loading one decodes only what it reads.

A section is a few zstd frames behind a table of their sizes. Decoding is what a start-up pays
(`flightlog find` opens the Directory, answers one query and exits), so each part is read in the
cheapest form that holds it:

- JSON for small structured parts (the head, the name lists and sort orders), the stems (what
  every open reads) as one NUL-joined string;
- rows as one JSON line each, decompressed at once but each line parsed only when that row is read
  (a query reads the ten rows it returns, not the section's thousands);
- postings (word -> row numbers) as a word list and two little-endian integer arrays, so loading
  them is a decompress, a split and an `array.frombytes`, and a word's rows are one slice.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, chain
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

import zstandard

_LEVEL = 3


def pack_json(value: object) -> bytes:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return zstandard.ZstdCompressor(level=_LEVEL).compress(raw)


def unpack_json(data: bytes) -> Any:
    return json.loads(_decompress(data))


def _decompress(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompress(data)


def frames(*parts: bytes) -> bytes:
    """Parts behind a table of their sizes (`split_frames` reads them back)."""
    return struct.pack(f">I{len(parts)}I", len(parts), *map(len, parts)) + b"".join(parts)


def split_frames(data: bytes) -> list[bytes]:
    (count,) = struct.unpack_from(">I", data)
    sizes = struct.unpack_from(f">{count}I", data, 4)
    at, out = 4 + 4 * count, []
    for size in sizes:
        out.append(data[at : at + size])
        at += size
    return out


def pack_strings(values: Sequence[str]) -> bytes:
    """Strings that never hold a NUL (stems: paths refuse one), joined by NUL."""
    return zstandard.ZstdCompressor(level=_LEVEL).compress("\0".join(values).encode("utf-8"))


def unpack_strings(data: bytes) -> list[str]:
    text = _decompress(data).decode("utf-8")
    return text.split("\0") if text else []


# ---- rows: one JSON line each ----------------------------------------------------------------


def encode_row(row: Sequence[Any]) -> bytes:
    """One row's line. JSON escapes every newline inside a string, so a row never spans two lines."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pack_lines(lines: Sequence[bytes]) -> bytes:
    """Rows already encoded (`encode_row`, or a line of an earlier section kept as it was)."""
    return zstandard.ZstdCompressor(level=_LEVEL).compress(b"\n".join(lines))


def row_key(line: bytes) -> tuple[str, str]:
    """The first two values of a row line, its path and hash, decoded without parsing the rest
    (a section's thousands of kept rows are matched by these alone). ValueError when the line
    does not start with two strings."""
    text = line.decode("utf-8")
    if not text.startswith('["'):
        raise ValueError("not a row line")
    path, at = scanstring(text, 2)
    if text[at : at + 2] != ',"':
        raise ValueError("not a row line")
    sha, _ = scanstring(text, at + 2)
    return path, sha


class RowLines:
    """The compiled rows of a section, each parsed on its first read."""

    def __init__(self, data: bytes, count: int) -> None:
        self._lines = _decompress(data).split(b"\n") if count else []
        self._parsed: dict[int, list[Any]] = {}

    def __len__(self) -> int:
        return len(self._lines)

    def line(self, i: int) -> bytes:
        """Row `i` as stored (`encode_row`'s line), undecoded."""
        return self._lines[i]

    def __getitem__(self, i: int) -> list[Any]:  # a row by number (nothing reads slices)
        row = self._parsed.get(i)
        if row is None:
            row = self._parsed[i] = list(json.loads(self._lines[i]))
        return row

    def __iter__(self) -> Iterator[list[Any]]:
        return (self[i] for i in range(len(self._lines)))


# ---- postings: word -> row numbers ------------------------------------------------------------


def pack_postings(postings: Mapping[str, Sequence[int]]) -> bytes:
    """Words (newline-separated: a word never holds one), each word's count, then every row number,
    as 16-bit integers while a section has fewer than 65,536 rows (half the bytes to decompress)."""
    words = list(postings)
    lists = [postings[w] for w in words]
    wide = any(len(rows) > 0xFFFF or (rows and max(rows) > 0xFFFF) for rows in lists)
    code = "I" if wide else "H"
    counts = array(code, map(len, lists))
    flat = array(code, chain.from_iterable(lists))  # the loops in C: a section holds ~70 words a row
    if sys.byteorder == "big":  # pragma: no cover - stored little-endian on every machine
        counts.byteswap()
        flat.byteswap()
    return _postings_frame(words, counts, flat.tobytes())


def _postings_frame(words: Sequence[str], counts: array[int], flat: bytes) -> bytes:
    """The stored form of postings: a head, the words, each word's count, then every row number
    (`flat`: little-endian, of `counts`' width)."""
    vocab = "\n".join(words).encode("utf-8")
    head = struct.pack(
        ">IIIc", len(vocab), len(counts), len(flat) // counts.itemsize, counts.typecode.encode()
    )
    return zstandard.ZstdCompressor(level=_LEVEL).compress(head + vocab + counts.tobytes() + flat)


class Postings(Mapping[str, Sequence[int]]):
    """Each word to the row numbers holding it (a slice of one array per lookup)."""

    def __init__(self, data: bytes) -> None:
        raw = _decompress(data)
        size, n, total, code = struct.unpack_from(">IIIc", raw)
        at = 13 + size
        words = raw[13:at].decode("utf-8").split("\n") if n else []
        counts, flat = array(code.decode()), array(code.decode())
        width = counts.itemsize
        counts.frombytes(raw[at : at + width * n])
        flat.frombytes(raw[at + width * n : at + width * (n + total)])
        if sys.byteorder == "big":  # pragma: no cover
            counts.byteswap()
            flat.byteswap()
        self._words = words
        self._at = dict(zip(words, range(n), strict=True))
        self._counts = counts
        self._starts = [0, *accumulate(counts)]
        self._flat = flat

    def __getitem__(self, word: str) -> Sequence[int]:
        k = self._at[word]
        return self._flat[self._starts[k] : self._starts[k + 1]]

    def __contains__(self, word: object) -> bool:
        return word in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)
