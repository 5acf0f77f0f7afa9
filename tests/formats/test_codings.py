"""Content codings (`formats.codings`): stacked in every order, unknown ones refused by name, corrupt
ones refused, and every decode bounded: a bomb stops at its cap, saying so, in bounded memory."""

from __future__ import annotations

import gzip
import itertools
import tracemalloc
import zlib
from collections.abc import Callable

import brotli
import pytest
import zstandard

from formats import codings
from formats.errors import CodingError, DecodeCapError

BODY = b"".join(b'data: {"n": %d, "text": "hello world"}\n\n' % i for i in range(3000))
COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}
STACKS = [stack for n in (1, 2, 3) for stack in itertools.permutations(["gzip", "deflate", "br", "zstd"], n)]


def _encoded(stack: tuple[str, ...], body: bytes = BODY) -> bytes:
    """The body with each coding applied in the order listed (by the libraries, not by us)."""
    for coding in stack:
        body = COMPRESS[coding](body)
    return body


@pytest.mark.parametrize("stack", STACKS, ids=", ".join)
def test_stacked_codings_decode_in_every_order(stack: tuple[str, ...]) -> None:
    """`gzip, br`, `br, zstd`, ... as the header lists them (in the order applied): decoded whole, and
    incrementally from 997-byte chunks, to the exact body; re-encoded, it decodes back again."""
    header = ", ".join(stack)
    raw = _encoded(stack)
    assert codings.decode(raw, header, cap=len(BODY)) == BODY
    decoder = codings.Decoder(codings.parse(header), cap=len(BODY))
    pieces = [p for i in range(0, len(raw), 997) for p in decoder.feed(raw[i : i + 997])]
    assert b"".join([*pieces, *decoder.finish()]) == BODY
    assert codings.decode(codings.encode(BODY, header), header, cap=len(BODY)) == BODY
    read = codings.readable(raw, header)
    assert (read.data, read.codings, read.problem, read.cut) == (BODY, stack, None, False)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, ()),
        ("", ()),
        ("identity", ()),
        (" GZip , br ", ("gzip", "br")),
        ("identity, zstd", ("zstd",)),
        ("x-gzip", ("x-gzip",)),
    ],
)
def test_parse_drops_identity_and_reads_any_spelling(header: str | None, expected: tuple[str, ...]) -> None:
    """Case, spaces and identity do not matter; the order applied is kept."""
    assert codings.parse(header) == expected


@pytest.mark.parametrize("header", ["compress", "gzip, compress", "bogus, br", "br, gzip, exi"])
def test_an_unknown_coding_anywhere_in_a_stack_is_refused_by_name(header: str) -> None:
    """A coding we cannot undo is never guessed at: decode refuses naming it; a reader keeps the raw
    bytes and says why."""
    unknown = next(c.strip() for c in header.split(",") if c.strip() not in codings.SUPPORTED)
    with pytest.raises(CodingError, match=f"unsupported content coding '{unknown}'"):
        codings.decode(b"whatever", header, cap=100)
    read = codings.readable(b"whatever", header)
    assert read.data == b"whatever" and read.problem == f"unsupported content coding {unknown!r}"
    assert not read.cut and read.codings == ()


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_a_corrupt_body_is_refused_and_read_as_kept(coding: str) -> None:
    """Bytes that are not what the header claims: an error naming the coding; the raw bytes kept."""
    raw = _encoded((coding,))
    damaged = raw[:4] + bytes(b ^ 0xFF for b in raw[4:])  # the magic kept, every other bit flipped
    with pytest.raises(CodingError, match=f"corrupt {coding} body"):
        codings.decode(damaged, coding, cap=len(BODY))
    read = codings.readable(damaged, coding)
    assert read.data is damaged and read.problem is not None and read.problem.startswith("corrupt")


def test_the_cap_is_exact() -> None:
    """A body decoding to exactly the cap is whole; one byte more stops, after yielding the cap."""
    raw = gzip.compress(BODY)
    assert codings.decode(raw, "gzip", cap=len(BODY)) == BODY
    with pytest.raises(DecodeCapError, match=f"cap of {len(BODY) - 1:,} bytes"):
        codings.decode(raw, "gzip", cap=len(BODY) - 1)
    read = codings.readable(raw, "gzip", cap=1000)
    assert read.cut and read.data == BODY[:1000] and read.codings == ("gzip",)
    assert read.problem == "decoded size passed its cap of 1,000 bytes; decoding stopped there"


BOMB_SIZE = 256 * 1024 * 1024
BOMBS: dict[str, Callable[[], bytes]] = {
    "gzip": lambda: gzip.compress(bytes(BOMB_SIZE), 9),
    "br": lambda: brotli.compress(bytes(BOMB_SIZE), quality=5),
    "zstd": lambda: zstandard.ZstdCompressor(level=19).compress(bytes(BOMB_SIZE)),
    "br, gzip": lambda: gzip.compress(brotli.compress(bytes(BOMB_SIZE), quality=5)),
    "gzip, zstd": lambda: zstandard.ZstdCompressor().compress(gzip.compress(bytes(BOMB_SIZE), 9)),
}


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    return {name: make() for name, make in BOMBS.items()}


@pytest.mark.parametrize("header", sorted(BOMBS))
def test_a_bomb_stops_at_the_cap_in_bounded_memory(bombs: dict[str, bytes], header: str) -> None:
    """A small body that decodes to 256 MiB stops at a 1 MiB cap with a clear reason, and decoding it
    never holds more than the cap and a few steps (the whole expansion would be 256 MiB)."""
    raw, cap = bombs[header], 1 << 20
    assert len(raw) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(DecodeCapError, match="decoded size passed its cap of 1,048,576 bytes"):
            codings.decode(raw, header, cap=cap)
        read = codings.readable(raw, header, cap=cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read.cut and len(read.data) == cap and read.data == bytes(cap)
    assert peak < cap + 24 * (1 << 20), f"{header}: peak {peak / 2**20:.1f} MiB"


def test_uncapped_streaming_keeps_each_step_small(bombs: dict[str, bytes]) -> None:
    """Without a cap (the redactor, which streams its output on), a bomb still comes out one bounded
    step at a time: no piece is larger than a step, whatever the expansion."""
    for header in ("gzip", "br", "zstd"):
        decoder = codings.Decoder(codings.parse(header), cap=None)
        largest = total = 0
        for piece in decoder.feed(bombs[header]):
            largest, total = max(largest, len(piece)), total + len(piece)
            if total > 64 << 20:
                break
        assert 0 < largest <= 8 << 20, header


def test_sniff_recognises_gzip_and_zstd_by_their_first_bytes() -> None:
    """Compressed bodies sent without a Content-Encoding are still known (redaction looks inside)."""
    assert codings.sniff(gzip.compress(b"x")) == "gzip"
    assert codings.sniff(zstandard.ZstdCompressor().compress(b"x")) == "zstd"
    assert codings.sniff(b"plain") is None


def test_gzip_members_and_trailing_padding() -> None:
    """Several gzip members are one body; zero padding after the last is not content."""
    raw = gzip.compress(b"one ") + gzip.compress(b"two") + b"\0\0\0"
    assert codings.decode(raw, "gzip", cap=100) == b"one two"


def test_raw_deflate_is_read_and_written_back_raw() -> None:
    """A deflate body without its zlib wrapper (as some servers send) decodes; the decoder says so."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw = compressor.compress(BODY) + compressor.flush()
    decoder = codings.Decoder(("deflate",), cap=len(BODY))
    assert b"".join([*decoder.feed(raw), *decoder.finish()]) == BODY and decoder.raw_deflate
