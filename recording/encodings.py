"""HTTP content codings (gzip, deflate, br, zstd), decoded and re-encoded incrementally.

Redaction and usage extraction look inside content-encoded bodies. Both work chunk by chunk with
bounded output per step, so a small compressed body that expands enormously (a "zip bomb") never
has to sit in memory whole. Pure functions over bytes: no mitmproxy here.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

import brotli
import zstandard

from recording.errors import EncodingError

#: Largest piece of decoded output produced by one decoding step.
STEP = 1 << 20

#: Compressed input is fed to a decoder in slices of this size, so that when a body turns out to be
#: corrupt, what decoded before the damage is still seen (a failing call loses its own output).
SLICE = 4 * 1024

#: The codings this module can decode and encode (lower case, as in the header).
SUPPORTED = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd"})


#: Content codings recognised by their first bytes when no Content-Encoding names them.
MAGIC = ((b"\x1f\x8b\x08", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"))
SNIFF = max(len(m) for m, _ in MAGIC)


def sniff(body: bytes) -> str | None:
    """The coding a body's magic bytes announce (gzip, zstd), or None."""
    for magic, coding in MAGIC:
        if body.startswith(magic):
            return coding
    return None


def parse_encodings(content_encoding: str | None) -> tuple[str, ...]:
    """The codings of a Content-Encoding value, in the order they were applied; identity dropped.

    Raises EncodingError for a coding this module does not know, so callers can fall back to
    treating the body as opaque bytes instead of guessing.
    """
    if not content_encoding:
        return ()
    codings = tuple(
        c for c in (part.strip().lower() for part in content_encoding.split(",")) if c and c != "identity"
    )
    unknown = [c for c in codings if c not in SUPPORTED]
    if unknown:
        raise EncodingError(f"unsupported content coding {unknown[0]!r}")
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
            raise EncodingError(f"corrupt {'gzip' if self._gzip else 'deflate'} body: {e}") from e

    def finish(self) -> Iterator[bytes]:
        if self._head:  # a one-byte deflate body: let zlib say what it is
            data, self._head = self._head, b""
            self._obj = self._new()
            yield from self.feed(data)
        if self._obj is not None:
            try:
                out = self._obj.flush()
            except zlib.error as e:
                raise EncodingError(f"corrupt body: {e}") from e
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
            raise EncodingError(f"corrupt br body: {e}") from e

    def finish(self) -> Iterator[bytes]:
        return iter(())


class _ZstdDecoder:
    def __init__(self) -> None:
        self._obj = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._obj.decompress(data)
        except zstandard.ZstdError as e:
            raise EncodingError(f"corrupt zstd body: {e}") from e
        for i in range(0, len(out), STEP):
            yield out[i : i + STEP]

    def finish(self) -> Iterator[bytes]:
        return iter(())


def _decoder(coding: str) -> _Step:
    if coding == "br":
        return _BrotliDecoder()
    if coding == "zstd":
        return _ZstdDecoder()
    return _ZlibDecoder(coding)


class Decoder:
    """Incremental decoder for a chain of codings: feed compressed chunks, get decoded pieces."""

    def __init__(self, codings: tuple[str, ...]) -> None:
        # Codings are listed in the order applied, so they are undone last to first.
        self.codings = codings
        self._steps = [_decoder(c) for c in reversed(codings)]

    def _through(self, index: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if index == len(self._steps):
            yield from pieces
            return
        step = self._steps[index]
        for piece in pieces:
            yield from self._through(index + 1, step.feed(piece))

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decoded pieces (each at most about STEP bytes) for one compressed chunk."""
        slices = (data[i : i + SLICE] for i in range(0, len(data), SLICE))
        return self._through(0, slices)

    def finish(self) -> Iterator[bytes]:
        """Whatever the decoders still hold at the end of the body."""
        for index, step in enumerate(self._steps):
            yield from self._through(index + 1, step.finish())

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


def decode(body: bytes, content_encoding: str | None) -> bytes:
    """A whole body decoded (for small bodies such as AI answers); raises EncodingError."""
    decoder = Decoder(parse_encodings(content_encoding))
    pieces = [*decoder.feed(body), *decoder.finish()]
    return b"".join(pieces)


def encode(data: bytes, content_encoding: str | None) -> bytes:
    """A whole body encoded with the codings of a Content-Encoding value."""
    encoder = Encoder(parse_encodings(content_encoding))
    return encoder.feed(data) + encoder.finish()
