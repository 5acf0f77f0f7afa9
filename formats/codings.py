"""HTTP content codings (gzip, deflate, br, zstd, stacked in any order), decoded and re-encoded
incrementally, every decode under a cap on its decoded size.

A recorded body keeps its content coding; whoever reads what it means (redaction, usage, MCP
messages, the browser, replay, export) undoes it here. Decoding is bounded twice: each step yields
at most about `STEP` bytes (a zstd step at most `ZSTD_SLICE` times zstd's largest expansion), so a
small body that expands enormously never sits in memory whole; and each decode takes a `cap`, past
which it stops with `DecodeCapError` (after yielding exactly `cap` bytes), so the caller keeps the
raw bytes and can say why. `cap=None` is for a caller that streams the output on and bounds it
itself (the redactor: its memory is one step).
"""

from __future__ import annotations

import zlib
from collections.abc import Buffer, Iterator
from dataclasses import dataclass
from typing import IO, Protocol, cast

import brotli
import zstandard

from formats.errors import CodingError, DecodeCapError

STEP = 1 << 20
"""Largest piece of decoded output one zlib or brotli step produces."""

SLICE = 4 * 1024
"""Compressed input is fed to a decoder in slices of this size, so that when a body turns out to be
corrupt, what decoded before the damage is still seen (a failing call loses its own output)."""

ZSTD_SLICE = 256
"""zstd input slice: zstd offers no output limit per call and one byte can expand to 32 KiB (an RLE
block), so a slice this small keeps one step's output under 8 MiB."""

READ_CAP = 64 * 1024 * 1024
"""What a reader of a recorded body (usage, the browser, replay, export) decodes at most."""

SUPPORTED = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd"})
"""The codings this module decodes and encodes (lower case, as in the header)."""

MAGIC = ((b"\x1f\x8b\x08", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"))
"""Codings recognised by their first bytes when no Content-Encoding names them."""
SNIFF = max(len(m) for m, _ in MAGIC)


def sniff(body: bytes) -> str | None:
    """The coding a body's magic bytes announce (gzip, zstd), or None."""
    for magic, coding in MAGIC:
        if body.startswith(magic):
            return coding
    return None


def parse(content_encoding: str | None) -> tuple[str, ...]:
    """The codings of a Content-Encoding value, in the order they were applied; identity dropped.

    Raises CodingError for a coding this module does not know, so callers treat the body as opaque
    bytes instead of guessing.
    """
    if not content_encoding:
        return ()
    codings = tuple(
        c for c in (part.strip().lower() for part in content_encoding.split(",")) if c and c != "identity"
    )
    unknown = [c for c in codings if c not in SUPPORTED]
    if unknown:
        raise CodingError(f"unsupported content coding {unknown[0]!r}")
    return codings


class _Step(Protocol):
    def feed(self, data: bytes) -> Iterator[bytes]: ...
    def finish(self) -> Iterator[bytes]: ...


class _ZlibDecoder:
    """gzip (possibly several members) or deflate (zlib-wrapped or raw, detected from the first bytes)."""

    def __init__(self, coding: str) -> None:
        self._gzip = coding in ("gzip", "x-gzip")
        self._obj: zlib._Decompress | None = None
        self._head = b""
        self.raw_deflate = False

    def _new(self) -> zlib._Decompress:
        if self._gzip:
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS if self.raw_deflate else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._obj is None:
            if not self._gzip:
                # A zlib header is two bytes; wait for them before choosing the flavour.
                self._head += data
                if len(self._head) < 2:
                    return
                b0, b1 = self._head[0], self._head[1]
                self.raw_deflate = not (b0 & 0x0F == 8 and (b0 * 256 + b1) % 31 == 0)
                data, self._head = self._head, b""
            self._obj = self._new()
        try:
            while data:
                if self._obj.eof:
                    if not (self._gzip and data.strip(b"\0")):
                        break  # trailing padding or garbage after the stream: not content
                    self._obj = self._new()  # another gzip member follows
                out = self._obj.decompress(data, STEP)
                if out:
                    yield out
                data = self._obj.unconsumed_tail or (self._obj.unused_data if self._obj.eof else b"")
        except zlib.error as e:
            raise CodingError(f"corrupt {'gzip' if self._gzip else 'deflate'} body: {e}") from e

    def finish(self) -> Iterator[bytes]:
        if self._head:  # a one-byte deflate body: let zlib say what it is
            data, self._head = self._head, b""
            self._obj = self._new()
            yield from self.feed(data)
        if self._obj is not None:
            try:
                out = self._obj.flush()
            except zlib.error as e:
                raise CodingError(f"corrupt body: {e}") from e
            if out:
                yield out


class _BrotliDecoder:
    def __init__(self) -> None:
        self._obj = brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._obj.process(data, output_buffer_limit=STEP)
            if out:
                yield out
            while not self._obj.can_accept_more_data():
                out = self._obj.process(b"", output_buffer_limit=STEP)
                if not out:
                    break
                yield out
        except brotli.error as e:
            raise CodingError(f"corrupt br body: {e}") from e

    def finish(self) -> Iterator[bytes]:
        return iter(())


class _Full(Exception):
    """A zstd step's output passed what its decoder may hold: stop decompressing this slice."""


class _Sink:
    """Where zstd writes a step's output, in pieces of at most STEP bytes; full once its output in
    all passes `cap` (the decoder's cap check then stops on these pieces)."""

    def __init__(self, cap: int | None) -> None:
        self.pieces: list[bytes] = []
        self.size = 0
        self.cap = cap

    def write(self, data: Buffer) -> int:
        data = bytes(data)
        self.pieces.append(data)
        self.size += len(data)
        if self.cap is not None and self.size > self.cap:
            raise _Full
        return len(data)


class _ZstdDecoder:
    def __init__(self, cap: int | None) -> None:
        self._sink = _Sink(cap)
        self._obj = zstandard.ZstdDecompressor().stream_writer(cast(IO[bytes], self._sink), write_size=STEP)
        self._full = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        sink = self._sink
        for i in range(0, len(data), ZSTD_SLICE):
            if self._full:
                return
            try:
                self._obj.write(data[i : i + ZSTD_SLICE])
            except _Full:
                self._full = True  # the cap check downstream raises on these pieces
            except zstandard.ZstdError as e:
                raise CodingError(f"corrupt zstd body: {e}") from e
            pieces, sink.pieces = sink.pieces, []
            yield from pieces

    def finish(self) -> Iterator[bytes]:
        return iter(())


def _decoder(coding: str, cap: int | None) -> _Step:
    if coding == "br":
        return _BrotliDecoder()
    if coding == "zstd":
        return _ZstdDecoder(cap)
    return _ZlibDecoder(coding)


class Decoder:
    """Incremental decoder for a chain of codings: feed compressed chunks, get decoded pieces.

    Every stage's output counts against `cap` (an inner coding's output is the next one's input, so
    a bomb inside a stack stops as early as one on its own); past it, the decoder yields the output
    up to exactly `cap` bytes and raises DecodeCapError.
    """

    def __init__(self, codings: tuple[str, ...], *, cap: int | None) -> None:
        # Codings are listed in the order applied, so they are undone last to first.
        self.codings = codings
        self.cap = cap
        self._steps = [_decoder(c, cap) for c in reversed(codings)]
        self._made = [0] * len(self._steps)

    def _capped(self, index: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if self.cap is None:
            yield from pieces
            return
        for piece in pieces:
            room = self.cap - self._made[index]
            if len(piece) > room:
                self._made[index] = self.cap
                if room:
                    yield piece[:room]
                raise DecodeCapError(self.cap)
            self._made[index] += len(piece)
            yield piece

    def _through(self, index: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if index == len(self._steps):
            yield from pieces
            return
        step = self._steps[index]
        for piece in pieces:
            yield from self._through(index + 1, self._capped(index, step.feed(piece)))

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decoded pieces for one compressed chunk."""
        slices = (data[i : i + SLICE] for i in range(0, len(data), SLICE))
        return self._through(0, slices)

    def finish(self) -> Iterator[bytes]:
        """Whatever the decoders still hold at the end of the body."""
        for index, step in enumerate(self._steps):
            yield from self._through(index + 1, self._capped(index, step.finish()))

    @property
    def raw_deflate(self) -> bool:
        """True when a deflate body turned out to be raw deflate (no zlib wrapper)."""
        return any(isinstance(s, _ZlibDecoder) and s.raw_deflate for s in self._steps)


class _Compressor(Protocol):
    def compress(self, data: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


class _BrotliCompressor:
    def __init__(self) -> None:
        self._obj = brotli.Compressor()

    def compress(self, data: bytes) -> bytes:
        return self._obj.process(data)

    def flush(self) -> bytes:
        return self._obj.finish()


def _compressor(coding: str, raw_deflate: bool) -> _Compressor:
    if coding == "br":
        return _BrotliCompressor()
    if coding == "zstd":
        return zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    if coding in ("gzip", "x-gzip"):
        return zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS if raw_deflate else zlib.MAX_WBITS)


class Encoder:
    """Incremental encoder for a chain of codings, applied in the order listed."""

    def __init__(self, codings: tuple[str, ...], raw_deflate: bool = False) -> None:
        self._steps = [_compressor(c, raw_deflate) for c in codings]

    def feed(self, data: bytes) -> bytes:
        """Encoded bytes for one decoded piece (possibly empty: compressors buffer)."""
        for step in self._steps:
            if not data:
                return b""
            data = step.compress(data)
        return data

    def finish(self) -> bytes:
        """The rest of the encoded body, ending every coding's stream properly."""
        out = b""
        for step in self._steps:
            out = (step.compress(out) if out else b"") + step.flush()
        return out


def decode(body: bytes, content_encoding: str | None, *, cap: int) -> bytes:
    """A whole body decoded; raises CodingError (unknown or corrupt) or DecodeCapError (past `cap`)."""
    decoder = Decoder(parse(content_encoding), cap=cap)
    return b"".join([*decoder.feed(body), *decoder.finish()])


def encode(data: bytes, content_encoding: str | None) -> bytes:
    """A whole body encoded with the codings of a Content-Encoding value."""
    encoder = Encoder(parse(content_encoding))
    return encoder.feed(data) + encoder.finish()


@dataclass(frozen=True, slots=True)
class Readable:
    """A body made readable: `data` decoded (whole, or its first `cap` bytes when `cut`), or the raw
    bytes with `problem` saying why they could not be decoded. `codings` are the ones undone."""

    data: bytes
    codings: tuple[str, ...] = ()
    problem: str | None = None
    cut: bool = False


def readable(body: bytes, content_encoding: str | None, *, cap: int = READ_CAP) -> Readable:
    """The body with its content coding undone for reading, never raising: an unknown coding or a
    corrupt body gives the raw bytes and the reason; a body decoding past `cap` gives its first `cap`
    decoded bytes, `cut`."""
    try:
        codings = parse(content_encoding)
    except CodingError as e:
        return Readable(body, problem=str(e))
    if not codings or not body:
        return Readable(body)
    decoder = Decoder(codings, cap=cap)
    pieces: list[bytes] = []
    try:
        for piece in decoder.feed(body):
            pieces.append(piece)
        for piece in decoder.finish():
            pieces.append(piece)
    except DecodeCapError as e:
        return Readable(b"".join(pieces), codings, str(e), cut=True)
    except CodingError as e:
        return Readable(body, problem=str(e))
    return Readable(b"".join(pieces), codings)
