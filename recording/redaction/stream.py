"""Redaction of one streamed body, chunk by chunk with memory bounded (see `StreamRedactor`).

The search itself is a `SecretSearch` (recording/redaction/search.py); this module holds back the
bytes a spelling split across chunks needs, and for compressed streams decodes, searches and, once
a secret is seen, re-encodes.
"""

from __future__ import annotations

from formats.codings import MAGIC, READ_CAP, SNIFF, Decoder, Encoder, parse, sniff
from formats.errors import CodingError
from recording.redaction.search import SecretSearch

#: Compressed bytes of a content-encoded stream held back, hoping to record them exact (see StreamRedactor).
HOLD_MAX = 8 * 1024 * 1024
EXPANSION = 100
"""A body is decoded for the secret search up to this many times the bytes received, or `READ_CAP`
(64 MiB), whichever is larger: real content compresses far less than that; a 1.6 KB brotli bomb
that decodes to 1 GiB stops at 64 MiB, so the writer's work is bounded by what a client sends."""


def decode_cap(received: int) -> int:
    """How far a body of `received` compressed bytes is decoded for the secret search."""
    return max(READ_CAP, EXPANSION * received)


class _Plain:
    """Search-and-replace over a stream of plain bytes, holding back a tail between chunks."""

    def __init__(self, search: SecretSearch, names: set[str]) -> None:
        self._r = search
        self._tail = b""
        self.names = names

    def feed(self, chunk: bytes) -> bytes:
        r = self._r
        if r.pattern is None:
            return chunk
        data = self._tail + chunk if self._tail else chunk
        limit = len(data) - r.holdback
        if limit <= 0:
            self._tail = data
            return b""
        pattern = r.matcher(data)
        if pattern is None:
            self._tail = data[limit:]
            return data[:limit]
        out, cut = r.sub_prefix(data, limit, self.names, pattern)
        self._tail = data[cut:]
        return out

    def flush(self) -> bytes:
        tail, self._tail = self._tail, b""
        return self._r.sub(tail, self.names)


class StreamRedactor:
    """Redacts one streamed body chunk by chunk, with memory bounded.

    `feed(chunk)` returns the bytes that are safe to record now; `flush()` returns the rest at the
    end; `redacted` holds the secret names replaced. Concatenated, the outputs are the recorded body.

    Plain (identity) streams: a tail one byte shorter than the longest spelling of any secret is held
    back between chunks, so a secret split across chunks is still caught. The output is the input
    exactly when no secret occurs.

    Content-encoded streams are decoded incrementally and searched. Up to `hold_max` compressed
    bytes are held back: if the stream ends within that without a secret, `flush()` returns the
    ORIGINAL compressed bytes, exact. Once a secret is seen, or the stream grows past `hold_max`,
    it is decoded, redacted and re-encoded in the same coding(s) from the start: the decoded content
    is exact except for the replacements, the compressed bytes are a new encoding (a compressed
    stream cannot be proven secret-free before its end without holding it whole). If the stream
    stops decoding part way, `decode_failed` is set and `problem` says why: with no secret seen the
    bytes are then searched as they are; after a secret, the re-encoded part that did decode is kept
    and the rest dropped. Decoding stops the same way past `decode_cap` of the bytes received (a
    decompression bomb): memory is one decoding step whatever the total, and CPU bounded by it.
    """

    def __init__(
        self, search: SecretSearch, content_encoding: str | None = None, hold_max: int = HOLD_MAX
    ) -> None:
        self._r = search
        self._names: set[str] = set()
        self._plain = _Plain(search, self._names)
        try:
            codings = parse(content_encoding)
        except CodingError:
            codings = ()
        self._codings = codings
        self._mode = "hold" if codings and search.pattern is not None else "plain"
        if not codings and search.pattern is not None:
            self._mode = "sniff"  # no coding named: the first bytes may still say gzip or zstd
        self._first = b""
        self._hold_max = hold_max
        self._held: list[bytes] = []
        self._held_size = 0
        self._received = 0
        self._scan_decoder = Decoder(codings, cap=READ_CAP) if self._mode == "hold" else None
        self._scan = _Plain(search, self._names)
        self._decoder: Decoder | None = None
        self._encoder: Encoder | None = None
        #: True when a content-encoded stream stopped decoding part way.
        self.decode_failed = False
        self.problem: str | None = None
        """Why it stopped (corrupt, or past its cap): the rest was searched as stored, not decoded."""

    @property
    def redacted(self) -> frozenset[str]:
        return frozenset(self._names)

    def feed(self, chunk: bytes) -> bytes:
        """The redacted bytes that can be recorded now (possibly empty)."""
        if self._mode == "plain":
            return self._plain.feed(chunk)
        if self._mode == "sniff":
            self._first += chunk
            if len(self._first) < SNIFF and any(m.startswith(self._first) for m, _ in MAGIC):
                return b""
            return self._sniffed()
        if self._mode == "transcode":
            return self._transcode(chunk)
        self._held.append(chunk)
        self._held_size += len(chunk)
        assert self._scan_decoder is not None
        self._scan_decoder.cap = decode_cap(self._held_size)
        try:
            for piece in self._scan_decoder.feed(chunk):
                self._scan.feed(piece)  # searching only: the output is not kept
        except CodingError as e:
            return self._after_scan_error(e)
        if self._names or self._held_size > self._hold_max:
            return self._start_transcoding()
        return b""

    def flush(self) -> bytes:
        """The rest, at the end of the stream."""
        if self._mode == "sniff":
            return self._sniffed() + self.flush()
        if self._mode == "plain":
            return self._plain.flush()
        if self._mode == "hold":
            assert self._scan_decoder is not None
            try:
                for piece in self._scan_decoder.finish():
                    self._scan.feed(piece)
            except CodingError as e:
                return self._after_scan_error(e) + self.flush()
            self._scan.flush()
            if not self._names:  # the common case: exact original bytes
                held, self._held = self._held, []
                return b"".join(held)
            return self._start_transcoding() + self.flush()
        # transcoding
        out: list[bytes] = []
        if self._decoder is not None:
            try:
                for piece in self._decoder.finish():
                    out.append(self._encoder_for().feed(self._plain.feed(piece)))
            except CodingError as e:
                return b"".join(out) + self._give_up_decoding(e)
            encoder = self._encoder_for()
            out.append(encoder.feed(self._plain.flush()))
            out.append(encoder.finish())
            self._decoder = None
            return b"".join(out)
        return self._plain.flush()

    def _sniffed(self) -> bytes:
        """Decide from the first bytes: a compressed body is held and searched decoded, like one
        whose Content-Encoding names its coding; anything else is plain."""
        first, self._first = self._first, b""
        coding = sniff(first)
        if coding is None:
            self._mode = "plain"
            return self._plain.feed(first)
        self._codings = (coding,)
        self._mode = "hold"
        self._scan_decoder = Decoder(self._codings, cap=READ_CAP)
        return self.feed(first)

    def _after_scan_error(self, error: CodingError) -> bytes:
        """The held bytes would not decode: search them raw, unless a secret was already seen."""
        self.decode_failed = True
        self.problem = f"not searched for secrets decoded ({error}): searched as stored"
        if self._names:
            return self._start_transcoding()
        self._mode = "plain"
        held, self._held = self._held, []
        return self._plain.feed(b"".join(held))

    def _start_transcoding(self) -> bytes:
        self._mode = "transcode"
        self._decoder = Decoder(self._codings, cap=decode_cap(self._held_size))
        self._received = self._held_size
        held, self._held = self._held, []
        return self._transcode(b"".join(held), counted=True)

    def _transcode(self, chunk: bytes, counted: bool = False) -> bytes:
        if self._decoder is None:  # decoding gave up: raw bytes from here on
            return self._plain.feed(chunk)
        if not counted:
            self._received += len(chunk)
            self._decoder.cap = decode_cap(self._received)
        out: list[bytes] = []
        try:
            for piece in self._decoder.feed(chunk):
                # The encoder is made once the first bytes decoded: raw deflate is known by then.
                out.append(self._encoder_for().feed(self._plain.feed(piece)))
        except CodingError as e:
            return b"".join(out) + self._give_up_decoding(e)
        return b"".join(out)

    def _encoder_for(self) -> Encoder:
        if self._encoder is None:
            raw_deflate = self._decoder.raw_deflate if self._decoder is not None else False
            self._encoder = Encoder(self._codings, raw_deflate=raw_deflate)
        return self._encoder

    def _give_up_decoding(self, error: CodingError) -> bytes:
        """After a decoding error: close what was encoded so far; search raw bytes from the next chunk.

        The chunk that failed is dropped, not recorded raw: its bytes may still carry, compressed,
        content that was already found to hold a secret.
        """
        self.decode_failed = True
        self.problem = f"decoded and redacted up to an error ({error}); the rest searched as stored"
        encoder = self._encoder_for()
        head = encoder.feed(self._plain.flush()) + encoder.finish()
        self._decoder = None
        return head
