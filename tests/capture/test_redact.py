"""Secret redaction over heads, URLs and bodies: canaries in every place and spelling a secret travels."""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Callable
from urllib.parse import quote, urlencode

import brotli
import pytest
import zstandard

from recording.redaction.redact import Redactor

CANARY = "sk-canary-7f3a9c1e5b2d8f4a"
ODD = "p@ss w/rd+é<&>~"  # characters that every escaping scheme treats differently
SECRETS = {"CANARY": CANARY, "ODD": ODD}


def _zstd_decompress(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


CODINGS: dict[str, tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]] = {
    "gzip": (gzip.compress, gzip.decompress),
    "deflate": (zlib.compress, zlib.decompress),
    "br": (brotli.compress, brotli.decompress),
    "zstd": (zstandard.compress, _zstd_decompress),
}


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(SECRETS)


def _assert_no_canary(data: bytes) -> None:
    for value in SECRETS.values():
        raw = value.encode()
        assert raw not in data
        assert quote(value, safe="").encode() not in data
        assert json.dumps(value)[1:-1].encode() not in data


# -- heads -----------------------------------------------------------------------------------------


def test_head_secret_in_header_and_query_string(redactor: Redactor) -> None:
    """A secret in the start line's query (percent-encoded) and in any header value becomes [NAME]."""
    head = (
        f"GET /v1/items?key={CANARY}&pw={quote(ODD, safe='')} HTTP/1.1\r\n"
        f"Host: api.example.com\r\nX-Custom-Secret: {CANARY}\r\n"
    ).encode()
    out, names = redactor.redact_head(head)
    assert out == (
        b"GET /v1/items?key=[CANARY]&pw=[ODD] HTTP/1.1\r\n"
        b"Host: api.example.com\r\nX-Custom-Secret: [CANARY]\r\n"
    )
    assert names == {"CANARY", "ODD"}


def test_head_auth_headers_redacted_by_default_keeping_scheme_and_cookie_names() -> None:
    """Unconfigured credentials in auth headers are hidden; scheme words, cookie names and attributes stay."""
    head = (
        b"POST /v1/messages HTTP/1.1\r\n"
        b"host: api.anthropic.com\r\n"
        b"authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\r\n"
        b"Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"
        b"X-API-Key: sk-ant-api03-unconfigured\r\n"
        b"Cookie: session=abc123; theme=dark\r\n"
        b"Set-Cookie: sid=xyz789; Path=/; HttpOnly; Secure\r\n"
        b"Set-Cookie: other=1\r\n"
        b"x-goog-api-key: AIzaSyUnconfigured\r\n"
        b"Content-Type: application/json\r\n"
    )
    out, names = Redactor({}).redact_head(head)
    assert out == (
        b"POST /v1/messages HTTP/1.1\r\n"
        b"host: api.anthropic.com\r\n"
        b"authorization: Bearer [REDACTED]\r\n"
        b"Proxy-Authorization: Basic [REDACTED]\r\n"
        b"X-API-Key: [REDACTED]\r\n"
        b"Cookie: session=[REDACTED]; theme=[REDACTED]\r\n"
        b"Set-Cookie: sid=[REDACTED]; Path=/; HttpOnly; Secure\r\n"
        b"Set-Cookie: other=[REDACTED]\r\n"
        b"x-goog-api-key: [REDACTED]\r\n"
        b"Content-Type: application/json\r\n"
    )
    assert names == {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "cookie",
        "set-cookie",
        "x-goog-api-key",
    }


def test_head_configured_secret_in_auth_header_keeps_its_name(redactor: Redactor) -> None:
    """`Authorization: Bearer <configured secret>` is recorded as `Bearer [CANARY]`, which says more."""
    out, names = redactor.redact_head(f"GET / HTTP/1.1\r\nAuthorization: Bearer {CANARY}\r\n".encode())
    assert out == b"GET / HTTP/1.1\r\nAuthorization: Bearer [CANARY]\r\n"
    assert names == {"CANARY"}


def test_head_auth_option_off_leaves_unconfigured_credentials(redactor: Redactor) -> None:
    """With redact_auth_headers off only configured secrets are replaced: here inside Basic auth."""
    basic = base64.b64encode(f"agent:{CANARY}".encode()).decode()
    head = f"GET / HTTP/1.1\r\nAuthorization: Basic {basic}\r\nCookie: session=abc123\r\n".encode()
    out, names = Redactor(SECRETS, redact_auth_headers=False).redact_head(head)
    assert b"Cookie: session=abc123\r\n" in out
    assert names == {"CANARY"}
    assert b"[CANARY]" in out
    # What is left of the base64 no longer decodes to anything holding the secret.
    assert CANARY.encode() not in base64.b64decode(basic.encode()[:8] + b"==", validate=False)
    assert basic.encode() not in out


def test_head_without_secret_is_the_same_object(redactor: Redactor) -> None:
    """No secret and no auth header: the very bytes given are returned (no copy, no change)."""
    head = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
    out, names = redactor.redact_head(head)
    assert out is head and names == frozenset()


def test_head_fields_that_only_mention_an_auth_header_are_left_alone() -> None:
    """A field whose name merely contains an auth header's name, or whose value reads like one, is
    no credential: the head comes back as the same bytes; one real auth field after them is still
    hidden, whatever its case."""
    head = (
        b"HTTP/1.1 200 OK\r\nX-Cookie-Policy: strict\r\nAuthorization-Hint: use a token\r\n"
        b"X-Note: cookie: a=1\r\nX-Api-Keys: 3\r\n"
    )
    out, names = Redactor({}).redact_head(head)
    assert out is head and names == frozenset()
    out, names = Redactor({}).redact_head(head + b"x-API-key: sk-123\r\n")
    assert out == head + b"x-API-key: [REDACTED]\r\n" and names == {"x-api-key"}


def test_head_keeps_case_order_duplicates_and_spacing() -> None:
    """Only the credential bytes change: header case, order, duplicates and odd spacing are kept."""
    head = b"HTTP/1.1 200 OK\r\nSET-COOKIE:a=1\r\nX-Dup: 1\r\nx-dup: 2\r\nset-cookie:   b=2 ;path=/\r\n\r\n"
    out, _ = Redactor({}).redact_head(head)
    assert out == (
        b"HTTP/1.1 200 OK\r\nSET-COOKIE:a=[REDACTED]\r\nX-Dup: 1\r\nx-dup: 2\r\n"
        b"set-cookie:   b=[REDACTED] ;path=/\r\n\r\n"
    )


# -- URLs ------------------------------------------------------------------------------------------


def test_url_secret_raw_and_form_encoded(redactor: Redactor) -> None:
    """redact_url replaces secrets in a URL string, raw or percent-encoded with + for space."""
    url = "https://api.example.com/v1/x?" + urlencode({"api_key": CANARY, "pw": ODD})
    out, names = redactor.redact_url(url)
    assert out == "https://api.example.com/v1/x?api_key=[CANARY]&pw=[ODD]"
    assert names == {"CANARY", "ODD"}
    clean = "https://example.com/?q=hello"
    assert redactor.redact_url(clean) == (clean, frozenset())


# -- bodies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(json.dumps({"key": CANARY, "pw": ODD}).encode(), id="json-ascii"),
        pytest.param(json.dumps({"key": CANARY, "pw": ODD}, ensure_ascii=False).encode(), id="json-utf8"),
        pytest.param(json.dumps({"pw": ODD}).replace("/", "\\/").encode(), id="json-escaped-slash"),
        pytest.param(json.dumps({"args": json.dumps({"pw": ODD})}).encode(), id="json-in-json"),
        pytest.param(urlencode({"key": CANARY, "pw": ODD}).encode(), id="form"),
        pytest.param(f"pw={quote(ODD, safe='').lower()}".encode(), id="percent-lower-hex"),
        pytest.param(base64.b64encode(f"x:{ODD}".encode()), id="base64-align-2"),
        pytest.param(base64.urlsafe_b64encode(f"{ODD}".encode()), id="base64url-align-0"),
        pytest.param(base64.b64encode(f"ab{CANARY}cd".encode()), id="base64-align-1"),
    ],
)
def test_body_spellings_are_replaced(redactor: Redactor, body: bytes) -> None:
    """Every common spelling of a secret in a body is found and replaced, and its name reported."""
    out, names = redactor.redact_body(body, None)
    assert names and names <= {"CANARY", "ODD"}
    _assert_no_canary(out)
    assert out != body


def test_body_json_replacement_is_exact(redactor: Redactor) -> None:
    """Only the secret's bytes change: the rest of the document is byte for byte the same."""
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"my key is ' + CANARY.encode() + b'"}]}'
    out, names = redactor.redact_body(body, None)
    assert out == b'{"model":"gpt-4o","messages":[{"role":"user","content":"my key is [CANARY]"}]}'
    assert names == {"CANARY"}


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_content_encoded_bodies(redactor: Redactor, coding: str) -> None:
    """Secrets inside gzip/deflate/br/zstd bodies are replaced and the body re-encoded in the same coding."""
    compress, decompress = CODINGS[coding]
    body = json.dumps({"key": CANARY, "note": "x" * 5000, "pw": ODD}).encode()
    out, names = redactor.redact_body(compress(body), coding)
    assert names == {"CANARY", "ODD"}
    plain = decompress(out)
    assert plain == body.replace(CANARY.encode(), b"[CANARY]").replace(
        json.dumps(ODD)[1:-1].encode(), b"[ODD]"
    )
    _assert_no_canary(out)


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_content_encoded_without_secret_is_untouched(redactor: Redactor, coding: str) -> None:
    """No secret inside: the original compressed bytes come back (the same object), not a re-encoding."""
    compress, _ = CODINGS[coding]
    body = compress(json.dumps({"hello": "world" * 1000}).encode())
    out, names = redactor.redact_body(body, coding)
    assert out is body and names == frozenset()


def test_stacked_codings_and_raw_deflate(redactor: Redactor) -> None:
    """`Content-Encoding: gzip, br` is undone in reverse order; raw deflate (no zlib header) works too."""
    body = f"token={CANARY}".encode()
    stacked = brotli.compress(gzip.compress(body))
    out, names = redactor.redact_body(stacked, "gzip, br")
    assert names == {"CANARY"} and gzip.decompress(brotli.decompress(out)) == b"token=[CANARY]"
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = compressor.compress(body) + compressor.flush()
    out, names = redactor.redact_body(raw, "deflate")
    assert names == {"CANARY"} and zlib.decompress(out, -15) == b"token=[CANARY]"


def test_body_that_lies_about_its_coding_is_searched_as_is(redactor: Redactor) -> None:
    """A body labelled gzip that isn't (or an unknown coding) is still searched byte for byte."""
    body = f"plain text {CANARY}".encode()
    for coding in ("gzip", "compress", "br"):
        out, names = redactor.redact_body(body, coding)
        assert out == b"plain text [CANARY]" and names == {"CANARY"}


def test_corrupt_gzip_holding_a_secret_does_not_keep_it(redactor: Redactor) -> None:
    """A gzip body damaged after a secret: the decodable part is kept, redacted; no secret survives."""
    body = b"".join(b"line %d %s\n" % (i, CANARY.encode()) for i in range(5000))
    packed = gzip.compress(body)
    damaged = packed[: len(packed) // 2] + b"\xff" * 64 + packed[len(packed) // 2 :]
    out, names = redactor.redact_body(damaged, "gzip")
    assert names == {"CANARY"}
    decoded = zlib.decompressobj(31).decompress(out)
    assert decoded.startswith(b"line 0 [CANARY]\n") and CANARY.encode() not in decoded


def test_no_secrets_configured_returns_bodies_untouched() -> None:
    """An empty Redactor is a no-op on bodies (auth header handling is about heads only)."""
    body = b"anything at all"
    assert Redactor({}).redact_body(body, "gzip") == (body, frozenset())


def test_overlapping_secrets_longest_wins() -> None:
    """A secret containing another is replaced as the longer one, under its own name."""
    r = Redactor({"SHORT": "abcd1234", "LONG": "xx-abcd1234-yy"})
    out, names = r.redact_body(b"a=xx-abcd1234-yy b=abcd1234", None)
    assert out == b"a=[LONG] b=[SHORT]" and names == {"LONG", "SHORT"}


# -- streams ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_stream_catches_secret_split_across_chunks(redactor: Redactor, size: int) -> None:
    """Fed in tiny chunks, a secret split across any boundary is still replaced."""
    body = b"data: " + b"a" * 37 + CANARY.encode() + b" and " + quote(ODD, safe="").encode() + b"\n\n"
    stream = redactor.stream()
    out = b"".join(stream.feed(body[i : i + size]) for i in range(0, len(body), size)) + stream.flush()
    assert out == b"data: " + b"a" * 37 + b"[CANARY] and [ODD]\n\n"
    assert stream.redacted == {"CANARY", "ODD"}


def test_stream_without_secret_is_identical_and_bounded(redactor: Redactor) -> None:
    """With no secret the concatenated output is the input; nothing more than the tail is held back."""
    chunks = [bytes([65 + i % 26]) * 1000 for i in range(200)]
    stream = redactor.stream()
    outs = [stream.feed(c) for c in chunks]
    assert all(len(o) >= 1000 - redactor.holdback for o in outs[1:])
    assert b"".join(outs) + stream.flush() == b"".join(chunks)
    assert stream.redacted == frozenset()


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_content_encoded_stream(redactor: Redactor, coding: str) -> None:
    """An encoded stream is decoded incrementally, redacted, and re-encoded in the same coding."""
    compress, decompress = CODINGS[coding]
    body = b"".join(b'data: {"n": %d, "k": "%s"}\n\n' % (i, CANARY.encode()) for i in range(300))
    packed = compress(body)
    stream = redactor.stream(coding)
    out = b"".join(stream.feed(packed[i : i + 100]) for i in range(0, len(packed), 100)) + stream.flush()
    assert decompress(out) == body.replace(CANARY.encode(), b"[CANARY]")
    assert stream.redacted == {"CANARY"} and not stream.decode_failed


def test_pure_modules_do_not_import_mitmproxy() -> None:
    """Redaction, usage and prices are plain functions over bytes: importing them loads no mitmproxy."""
    import subprocess
    import sys

    code = (
        "import sys, recording.redaction.secrets, recording.redaction.redact\n"
        "import formats.usage, recording.prices\n"
        "sys.exit(1 if any(m.split('.')[0] == 'mitmproxy' for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_content_encoded_stream_without_secret_is_recorded_exact(redactor: Redactor, coding: str) -> None:
    """An encoded stream with no secret, within the hold bound, comes out as the original compressed bytes."""
    compress, _ = CODINGS[coding]
    packed = compress(b"".join(b'data: {"n": %d}\n\n' % i for i in range(2000)))
    stream = redactor.stream(coding)
    outs = [stream.feed(packed[i : i + 500]) for i in range(0, len(packed), 500)]
    assert b"".join(outs) == b""  # held back until the end proves there is no secret
    assert stream.flush() == packed and stream.redacted == frozenset()


def test_content_encoded_stream_past_the_hold_bound_is_reencoded(redactor: Redactor) -> None:
    """Past hold_max the stream is re-encoded as it goes: memory stays bounded, content stays exact."""
    body = b"".join(b"line %d\n" % i for i in range(50_000))
    packed = gzip.compress(body)
    stream = redactor.stream("gzip", hold_max=4096)
    outs = [stream.feed(packed[i : i + 1024]) for i in range(0, len(packed), 1024)]
    assert sum(len(o) for o in outs[:10]) > 0  # output flows once the bound is passed
    assert gzip.decompress(b"".join(outs) + stream.flush()) == body


def test_content_encoded_stream_that_is_not_encoded(redactor: Redactor) -> None:
    """A stream labelled gzip that isn't is searched as raw bytes and flagged decode_failed."""
    body = f"data: {CANARY}\n\n".encode() * 3
    stream = redactor.stream("gzip")
    out = stream.feed(body[:10]) + stream.feed(body[10:]) + stream.flush()
    assert out == b"data: [CANARY]\n\n" * 3 and stream.decode_failed and stream.redacted == {"CANARY"}


# -- the rarer spellings: hex, base64 of base64, every character \uXXXX, gzip with no header -------


def _escaped(value: str, upper: bool = False) -> str:
    units = value.encode("utf-16-be")
    codes = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    return "".join("\\u" + (c.upper() if upper else c) for c in codes)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"digest={CANARY.encode().hex()}".encode(), id="hex-lower"),
        pytest.param(f"digest={CANARY.encode().hex().upper()};".encode(), id="hex-upper"),
        pytest.param(f"pw={ODD.encode().hex()}".encode(), id="hex-odd"),
        pytest.param(base64.b64encode(base64.b64encode(f"user:{CANARY}".encode())), id="base64-of-base64"),
        pytest.param(
            b"x" + base64.b64encode(b"ab" + base64.urlsafe_b64encode(f"{ODD}!".encode()) + b"z"),
            id="base64-of-base64url",
        ),
        pytest.param(f'{{"k": "{_escaped(CANARY)}"}}'.encode(), id="json-all-escaped"),
        pytest.param(f'{{"k": "{_escaped(ODD, upper=True)}"}}'.encode(), id="json-all-escaped-upper"),
        pytest.param(
            json.dumps({"args": f'{{"k": "{_escaped(CANARY)}"}}'}).encode(), id="all-escaped-in-json"
        ),
    ],
)
def test_rarer_spellings_are_replaced(redactor: Redactor, body: bytes) -> None:
    """Hex (either case), base64 of base64 (either alphabet, any alignment) and JSON with every
    character escaped: the secret is gone and its name reported, in a body and in a stream."""
    out, names = redactor.redact_body(body, None)
    assert names and names <= {"CANARY", "ODD"} and b"[" in out
    for value in SECRETS.values():
        raw = value.encode()
        for form in (raw.hex().encode(), raw.hex().upper().encode(), _escaped(value).encode()):
            assert form not in out
    assert base64.b64encode(CANARY.encode())[4:20] not in out
    stream = redactor.stream()
    streamed = b"".join(stream.feed(body[i : i + 7]) for i in range(0, len(body), 7)) + stream.flush()
    assert streamed == out and stream.redacted == names


def test_rarer_spellings_keep_a_clean_long_body_untouched(redactor: Redactor) -> None:
    """A body with long hex and base64 runs that hold no secret comes back as the same object."""
    body = json.dumps({"sha": "ab" * 200, "img": base64.b64encode(bytes(range(256)) * 40).decode()}).encode()
    out, names = redactor.redact_body(body, None)
    assert out is body and names == frozenset()


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_compressed_body_without_content_encoding_is_sniffed(redactor: Redactor, coding: str) -> None:
    """A gzip or zstd body sent with no Content-Encoding (recognised by its magic bytes) is decoded,
    redacted and re-encoded in the same coding; without a secret it comes back untouched."""
    compress, decompress = CODINGS[coding]
    body = json.dumps({"key": CANARY, "note": "y" * 3000}).encode()
    out, names = redactor.redact_body(compress(body), None)
    assert names == {"CANARY"}
    assert decompress(out) == body.replace(CANARY.encode(), b"[CANARY]")
    clean = compress(b"nothing to see " * 100)
    assert redactor.redact_body(clean, None)[0] is clean
    stream = redactor.stream(None)
    packed = compress(body)
    streamed = b"".join(stream.feed(packed[i : i + 2]) for i in range(0, len(packed), 2)) + stream.flush()
    assert stream.redacted == {"CANARY"} and decompress(streamed) == body.replace(
        CANARY.encode(), b"[CANARY]"
    )


def test_gzip_magic_on_a_body_that_is_not_gzip_is_searched_as_is(redactor: Redactor) -> None:
    """Bytes that only start like gzip are searched as they are: nothing lost, the secret still found."""
    body = b"\x1f\x8b\x08 not really gzip " + CANARY.encode()
    out, names = redactor.redact_body(body, None)
    assert out == b"\x1f\x8b\x08 not really gzip [CANARY]" and names == {"CANARY"}
    stream = redactor.stream(None)
    assert stream.feed(body[:2]) + stream.feed(body[2:]) + stream.flush() == out
