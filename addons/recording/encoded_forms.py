"""The byte strings a secret value takes on the wire: raw, percent-encoded, base64 and JSON-escaped.

A secret travels in many spellings: `%2F` or `%2f` in a query string, `+` for a space in a form body,
base64 inside a Basic `Authorization` header or a JSON field, `\\/` or `\\u00xx` in JSON, and JSON
inside JSON (tool-call arguments are a JSON string inside a JSON body). Each spelling is a literal
byte string, so finding a secret is finding any of a fixed set of literals. The set is computed
once per secret, deduplicated; for a typical API key (letters, digits, `-`, `_`) most spellings
collapse into the raw value and the three base64 alignments.
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


def base64_forms(raw: bytes) -> set[bytes]:
    """The base64 characters that depend on the secret alone, at each of the 3 alignments.

    Inside base64 of `prefix + secret + suffix`, where the secret starts depends on len(prefix) mod 3.
    For each alignment the characters fully determined by the secret's bits are the same whatever
    the prefix and suffix are; that run is what we look for (standard and URL-safe alphabets, and
    the standard one with `+` `/` percent-encoded as in a query string). Basic auth `user:secret`
    is the common case.
    """
    forms: set[bytes] = set()
    for align in range(3):
        encoded = base64.b64encode(b"\0" * align + raw).rstrip(b"=")
        first = -(-8 * align // 6)  # characters that still carry prefix bits
        last = 8 * (align + len(raw)) // 6  # characters fully inside the secret's bits
        core = encoded[first:last]
        if len(core) < MIN_BASE64:
            continue
        forms.add(core)
        forms.add(core.replace(b"+", b"-").replace(b"/", b"_"))
        forms.add(core.replace(b"+", b"%2B").replace(b"/", b"%2F"))
    return forms


def encoded_forms(value: str) -> set[bytes]:
    """Every spelling of one secret value that the Redactor looks for."""
    raw = value.encode("utf-8")
    forms = {raw} | percent_forms(raw) | json_forms(value) | base64_forms(raw)
    for form in list(forms):  # percent-encoded JSON, as in a JSON document passed in a query string
        if form != raw and b"\\" in form:
            forms.add(quote(form, safe="").encode("ascii"))
    return {f for f in forms if f}
