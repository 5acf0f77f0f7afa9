"""Properties of redaction, checked on generated data: no secret → identical bytes; secret anywhere → gone."""

from __future__ import annotations

import base64
import gzip
import json
from urllib.parse import quote, quote_plus

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from recording.redaction.redact import Redactor

# Secrets look like real keys: a prefix and a random tail, long enough to be unlikely by chance.
_KEY_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
secret_values = st.builds(
    lambda prefix, tail: prefix + tail,
    st.sampled_from(["sk-", "sk-ant-", "ghp_", "xoxb-", "AKIA", ""]),
    st.text(alphabet=_KEY_ALPHABET, min_size=12, max_size=48),
)
# Secrets with characters that escaping schemes treat differently.
odd_values = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=8, max_size=24
).filter(lambda v: v.strip() == v and len(set(v)) > 3)

SPELLINGS = {
    "raw": lambda v: v.encode(),
    "percent": lambda v: quote(v, safe="").encode(),
    "percent-lower": lambda v: _lower_hex(quote(v, safe="")),
    "form": lambda v: quote_plus(v, safe="").encode(),
    "json": lambda v: json.dumps(v)[1:-1].encode(),
    "json-utf8": lambda v: json.dumps(v, ensure_ascii=False)[1:-1].encode(),
    "json-in-json": lambda v: json.dumps(json.dumps(v))[1:-1].encode(),
    "hex": lambda v: v.encode().hex().encode(),
    "hex-upper": lambda v: v.encode().hex().upper().encode(),
    "json-every-char-escaped": lambda v: _every_char_escaped(v).encode(),
    "json-every-char-escaped-upper": lambda v: _every_char_escaped(v).upper().replace("\\U", "\\u").encode(),
}


def _every_char_escaped(value: str) -> str:
    units = value.encode("utf-16-be")
    return "".join("\\u" + units[i : i + 2].hex() for i in range(0, len(units), 2))


def _lower_hex(quoted: str) -> bytes:
    out = []
    i = 0
    while i < len(quoted):
        if quoted[i] == "%":
            out.append(quoted[i : i + 3].lower())
            i += 3
        else:
            out.append(quoted[i])
            i += 1
    return "".join(out).encode()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secret_values, body=st.binary(max_size=4096))
def test_no_secret_means_identical_bytes(secret: str, body: bytes) -> None:
    """Any body that holds no spelling of the secret comes back as the very same bytes, with no names."""
    redactor = Redactor({"KEY": secret})
    assume(not any(form in body for form in redactor.forms))
    out, names = redactor.redact_body(body, None)
    assert out is body and names == frozenset()
    stream = redactor.stream()
    cut = len(body) // 3
    assert stream.feed(body[:cut]) + stream.feed(body[cut:]) + stream.flush() == body


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.one_of(secret_values, odd_values),
    spelling=st.sampled_from(sorted(SPELLINGS)),
    before=st.binary(max_size=300),
    after=st.binary(max_size=300),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_secret_anywhere_is_gone(secret: str, spelling: str, before: bytes, after: bytes, chunk: int) -> None:
    """A secret in any spelling, between any bytes, is gone from the body and from a chunked stream."""
    redactor = Redactor({"KEY": secret})
    form = SPELLINGS[spelling](secret)
    body = before + form + after
    out, names = redactor.redact_body(body, None)
    assert form not in out and names == {"KEY"}
    stream = redactor.stream()
    streamed = b"".join(stream.feed(body[i : i + chunk]) for i in range(0, len(body), chunk)) + stream.flush()
    assert form not in streamed and stream.redacted == {"KEY"}


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=secret_values,
    prefix=st.binary(max_size=40),
    suffix=st.binary(max_size=40),
    urlsafe=st.booleans(),
)
def test_base64_at_any_alignment(secret: str, prefix: bytes, suffix: bytes, urlsafe: bool) -> None:
    """Base64 of bytes holding the secret at any offset loses the characters that encode it.

    At most the two characters on each side that mix the secret's bits with its neighbours' stay,
    so no more than 12 of the secret's bits survive.
    """
    redactor = Redactor({"KEY": secret}, redact_auth_headers=False)
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    blob = encode(prefix + secret.encode() + suffix)
    out, names = redactor.redact_body(b"Basic " + blob, None)
    assert names == {"KEY"}
    kept = out.split(b"[KEY]")
    assert len(kept) == 2
    assert len(blob) - (len(kept[0]) + len(kept[1]) - len(b"Basic ")) >= (len(secret) * 4) // 3 - 2


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secret_values, text=st.text(max_size=2000))
def test_gzip_bodies(secret: str, text: str) -> None:
    """Inside gzip: a secret is gone after decoding; without it, the compressed bytes are untouched."""
    redactor = Redactor({"KEY": secret})
    clean = gzip.compress(text.encode())
    assume(not any(form in text.encode() for form in redactor.forms))
    assert redactor.redact_body(clean, "gzip")[0] is clean
    dirty = gzip.compress((text + secret + text).encode())
    out, names = redactor.redact_body(dirty, "gzip")
    assert names == {"KEY"} and secret.encode() not in gzip.decompress(out)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=secret_values,
    inner=st.tuples(st.binary(max_size=20), st.binary(max_size=20)),
    outer=st.tuples(st.binary(max_size=20), st.binary(max_size=20)),
    urlsafe=st.booleans(),
)
def test_base64_of_base64_at_any_alignment(
    secret: str, inner: tuple[bytes, bytes], outer: tuple[bytes, bytes], urlsafe: bool
) -> None:
    """Base64 of base64 of bytes holding the secret, both at any offset: replaced, and decoding what
    is left twice no longer gives the secret."""
    redactor = Redactor({"KEY": secret}, redact_auth_headers=False)
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    once = encode(inner[0] + secret.encode() + inner[1])
    blob = base64.b64encode(outer[0] + once + outer[1])
    out, names = redactor.redact_body(blob, None)
    assert names == {"KEY"} and out.count(b"[KEY]") >= 1
    assert secret.encode() not in out and once not in out


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secret_values, text=st.text(max_size=2000))
def test_gzip_without_a_header_is_looked_into(secret: str, text: str) -> None:
    """A gzip body with no Content-Encoding: a secret inside is gone after decoding."""
    redactor = Redactor({"KEY": secret})
    dirty = gzip.compress((text + secret + text).encode())
    out, names = redactor.redact_body(dirty, None)
    assert names == {"KEY"} and secret.encode() not in gzip.decompress(out)
