"""The byte strings a secret value takes on the wire: raw, percent-encoded, base64 and JSON-escaped;
and, rarer, hex, base64 of base64, and JSON with every character `\\uXXXX`-escaped.

A secret travels in many spellings: `%2F` or `%2f` in a query string, `+` for a space in a form body,
base64 inside a Basic `Authorization` header or a JSON field, `\\/` or `\\u00xx` in JSON, and JSON
inside JSON (tool-call arguments are a JSON string inside a JSON body). Each spelling is a literal
byte string, so finding a secret is finding any of a fixed set of literals. The set is computed
once per secret, deduplicated; for a typical API key (letters, digits, `-`, `_`) most spellings
collapse into the raw value and the three base64 alignments.

The rarer spellings (`gated_forms`) are all long runs of characters from `RUN_ALPHABET`; the
Redactor only looks for them in data that holds such a run, so they cost almost nothing on bodies
that do not.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

#: Base64 fragments shorter than this are not searched for: too likely to occur by chance.
MIN_BASE64 = 5

# Characters left unescaped by common percent-encoders besides letters, digits and `-._~`:
# Python's quote (""), its default ("/"), JavaScript's encodeURIComponent and encodeURI.
_SAFE_SETS = ("", "/", "!*'()", ";,/?:@&=+$#!*'()")
_HEX = re.compile(rb"%[0-9A-F]{2}")
_JSON_HEX = re.compile(rb"\\u[0-9a-f]{4}")


def percent_forms(raw: bytes) -> set[bytes]:
    """Percent-encoded spellings: each encoder's safe set, `+` or `%20` for space, upper or lower hex."""
    forms: set[bytes] = set()
    for safe in _SAFE_SETS:
        for quoted in (quote(raw, safe=safe), quote_plus(raw, safe=safe)):
            for variant in (quoted, quoted.replace("~", "%7E")):  # PHP's rawurlencode escapes ~
                upper = variant.encode("ascii")
                forms.add(upper)
                forms.add(_HEX.sub(lambda m: m.group(0).lower(), upper))
    return forms


def json_forms(value: str) -> set[bytes]:
    """JSON string-escaped spellings (without the quotes), escaped once and twice.

    Variants: non-ASCII escaped or not, `/` escaped as `\\/` (PHP), `<>&` escaped as `\\u003c`...
    (Go's encoding/json), and upper-case hex digits in `\\uXXXX`.
    """
    once: set[str] = set()
    for ascii_only in (True, False):
        base = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        for slash in (False, True):
            s = base.replace("/", "\\/") if slash else base
            once.add(s)
            once.add(s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    twice = {json.dumps(s, ensure_ascii=True)[1:-1] for s in once}
    forms: set[bytes] = set()
    for s in once | twice:
        lower = s.encode("utf-8")
        forms.add(lower)
        forms.add(_JSON_HEX.sub(lambda m: m.group(0).upper().replace(b"\\U", b"\\u"), lower))
    return forms


def _cores(raw: bytes) -> list[bytes]:
    """The standard-alphabet base64 characters that depend on `raw` alone, at alignments 0, 1, 2."""
    cores = []
    for align in range(3):
        encoded = base64.b64encode(b"\0" * align + raw).rstrip(b"=")
        first = -(-8 * align // 6)  # characters that still carry prefix bits
        last = 8 * (align + len(raw)) // 6  # characters fully inside the secret's bits
        cores.append(encoded[first:last])
    return cores


def base64_forms(raw: bytes) -> set[bytes]:
    """The base64 characters that depend on the secret alone, at each of the 3 alignments.

    Inside base64 of `prefix + secret + suffix`, where the secret starts depends on len(prefix) mod 3.
    For each alignment the characters fully determined by the secret's bits are the same whatever
    the prefix and suffix are; that run is what we look for (standard and URL-safe alphabets, and
    the standard one with `+` `/` percent-encoded as in a query string). Basic auth `user:secret`
    is the common case.
    """
    forms: set[bytes] = set()
    for core in _cores(raw):
        if len(core) < MIN_BASE64:
            continue
        forms.add(core)
        forms.add(core.replace(b"+", b"-").replace(b"/", b"_"))
        forms.add(core.replace(b"+", b"%2B").replace(b"/", b"%2F"))
    return forms


def hex_forms(raw: bytes) -> set[bytes]:
    """The bytes as hex digits, lower and upper case."""
    return {raw.hex().encode("ascii"), raw.hex().upper().encode("ascii")}


def escaped_forms(value: str) -> set[bytes]:
    """JSON with every character `\\uXXXX`-escaped (UTF-16 units: a pair for a non-BMP character),
    lower and upper hex, and that again JSON-escaped (`\\\\uXXXX`, JSON inside JSON)."""
    units = value.encode("utf-16-be")
    codes = [units[i : i + 2].hex() for i in range(0, len(units), 2)]
    once = {"".join("\\u" + c for c in codes), "".join("\\u" + c.upper() for c in codes)}
    return {s.encode("ascii") for s in once | {json.dumps(s)[1:-1] for s in once}}


def double_base64_forms(raw: bytes) -> set[bytes]:
    """Base64 of base64: the outer characters that depend on the secret's inner base64 alone, for
    each inner alignment (standard and URL-safe alphabets) at each outer alignment."""
    inner = set()
    for core in _cores(raw):
        inner |= {core, core.replace(b"+", b"-").replace(b"/", b"_")}
    forms: set[bytes] = set()
    for core in inner:
        forms |= base64_forms(core)
    return forms


RUN_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_%\\")
"""Every character a gated spelling is made of: hex digits, base64 (both alphabets, `%2B`/`%2F`),
and `\\uXXXX` escapes."""


def gated_forms(value: str) -> set[bytes]:
    """The rarer spellings: hex, JSON with every character escaped, base64 of base64."""
    raw = value.encode("utf-8")
    forms = hex_forms(raw) | escaped_forms(value) | double_base64_forms(raw)
    assert all(set(f) <= RUN_ALPHABET for f in forms)
    return forms


def plain_forms(value: str) -> set[bytes]:
    """The common spellings: raw, percent-encoded, JSON-escaped, base64, percent-encoded JSON."""
    raw = value.encode("utf-8")
    forms = {raw} | percent_forms(raw) | json_forms(value) | base64_forms(raw)
    for form in list(forms):  # percent-encoded JSON, as in a JSON document passed in a query string
        if form != raw and b"\\" in form:
            forms.add(quote(form, safe="").encode("ascii"))
    return {f for f in forms if f}


def encoded_forms(value: str) -> set[bytes]:
    """Every spelling of one secret value that the Redactor looks for."""
    return plain_forms(value) | gated_forms(value)
