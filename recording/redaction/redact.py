"""Secret redaction: configured secret values become `[NAME]` before anything reaches the Ledger.

This is one of the stated exceptions to exact bytes (DESIGN.md, Capture): in heads, URLs and bodies
(also inside gzip/deflate/br/zstd bodies, gzip and zstd ones recognised by their magic bytes when no
Content-Encoding says so, and in percent-, base64-, JSON-escaped, hex, base64-of-base64 and
all-`\\uXXXX` spellings) every configured secret value is replaced by its name in brackets, and the
names replaced are returned so they can be kept on the event. Credentials in well-known auth headers
are redacted by default even when they are not configured. Bytes that hold no secret are returned
untouched, identical.

Pure functions over bytes (no mitmproxy): the capture writer thread calls them off the event loop.
The search itself is `secret_search.SecretSearch`; a streamed body is `redact_stream.StreamRedactor`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from formats.codings import parse, sniff
from formats.errors import CodingError
from recording.errors import RedactError
from recording.redaction.search import SecretSearch
from recording.redaction.stream import HOLD_MAX, StreamRedactor

__all__ = ["HOLD_MAX", "REDACTED", "RedactError", "Redactor", "StreamRedactor"]

#: What replaces an unconfigured credential in an auth header.
REDACTED = b"[REDACTED]"

#: Headers whose values are credentials (lower case). Authorization-like ones keep their scheme word;
#: cookies keep their names and attributes.
AUTH_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",  # Anthropic, many others
        "api-key",  # Azure OpenAI
        "x-auth-token",
        "x-goog-api-key",  # Gemini
        "x-api-token",
        "x-access-token",
        "private-token",  # GitLab
        "x-amz-security-token",
        "ocp-apim-subscription-key",  # Azure API Management
    }
)
_SCHEMED = frozenset({"authorization", "proxy-authorization"})


_HEADER = re.compile(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(:[ \t]*)(.*?)([ \t]*)$", re.DOTALL)
_AUTH_LINE = re.compile(
    rb"\r\n(?:" + b"|".join(re.escape(h.encode()) for h in sorted(AUTH_HEADERS)) + rb"):", re.IGNORECASE
)
"""A header line `_HEADER` would read as one of AUTH_HEADERS (its name, then the colon at once): a
head without one needs no line-by-line look (that look was the writer's largest single cost per
request after the database, bench.writer)."""


class Redactor:
    """Replaces configured secrets (and, by default, auth header values) in recorded bytes.

    Built once from the secrets; thread-safe to use (it holds no per-call state).
    """

    def __init__(self, secrets: Mapping[str, str], redact_auth_headers: bool = True) -> None:
        self.redact_auth_headers = redact_auth_headers
        self._search = SecretSearch(secrets)

    @property
    def forms(self) -> tuple[bytes, ...]:
        """Every spelling searched for, longest first."""
        return self._search.forms

    @property
    def holdback(self) -> int:
        """Bytes a stream holds back so a spelling split across chunks is still caught."""
        return self._search.holdback

    def redact_url(self, url: str) -> tuple[str, frozenset[str]]:
        """A URL with secret values (in any spelling) replaced by `[NAME]`."""
        names: set[str] = set()
        raw = url.encode("utf-8", "surrogateescape")
        out = self._search.sub(raw, names)
        if out is raw:
            return url, frozenset()
        return out.decode("utf-8", "surrogateescape"), frozenset(names)

    def redact_head(self, head: bytes) -> tuple[bytes, frozenset[str]]:
        """A head (start line + header fields joined by CRLF) with secrets and credentials redacted.

        Configured secrets are replaced anywhere in the head, the start line's URL included. When
        `redact_auth_headers` is on, the values of AUTH_HEADERS are redacted even when not configured:
        `Authorization: Bearer [REDACTED]` keeps its scheme word; `Cookie`/`Set-Cookie` keep cookie
        names and attributes. A credential that is exactly one configured secret keeps its `[NAME]`.
        Header names' case, order, duplicates and spacing are kept. The names returned are the secret
        names plus the lower-cased names of the auth headers redacted.
        """
        names: set[str] = set()
        out = self._search.sub(head, names)
        if self.redact_auth_headers and _AUTH_LINE.search(out) is not None:
            lines = out.split(b"\r\n")
            changed = False
            for i in range(1, len(lines)):
                match = _HEADER.match(lines[i])
                if match is None:
                    continue
                header = match.group(1).decode("ascii").lower()
                if header not in AUTH_HEADERS or not match.group(3):
                    continue
                value = _redact_credential(header, match.group(3), self._search.own)
                if value != match.group(3):
                    lines[i] = match.group(1) + match.group(2) + value + match.group(4)
                    names.add(header)
                    changed = True
            if changed:
                out = b"\r\n".join(lines)
        if not names:
            return head, frozenset()
        return out, frozenset(names)

    def redact_body(self, body: bytes, content_encoding: str | None) -> tuple[bytes, frozenset[str]]:
        """A body with secret values replaced, looking inside content-encoded bodies.

        A content-encoded body is decoded piece by piece (memory bounded) and searched; if no secret
        is found the ORIGINAL bytes are returned untouched. If one is found, the body is re-encoded
        in the same coding(s): its decoded content is exact except for the replacements, its
        compressed bytes are a new encoding. A body that does not decode as its header claims
        (unknown coding, corrupt data) is searched as it is; if it was corrupt only after a secret
        was found, the result is the redacted, re-encoded part that did decode.
        """
        out, names, _ = self.redact_body_noting(body, content_encoding)
        return out, names

    def redact_body_noting(
        self, body: bytes, content_encoding: str | None
    ) -> tuple[bytes, frozenset[str], str | None]:
        """`redact_body`, and why the body was searched as stored rather than decoded, if it was
        (corrupt, or decoding past its cap: `redact_stream.decode_cap`)."""
        if self._search.pattern is None or not body:
            return body, frozenset(), None
        try:
            codings = parse(content_encoding)
        except CodingError:
            codings = ()
        if not codings:
            sniffed = sniff(body)
            if sniffed is None:
                names: set[str] = set()
                out = self._search.sub(body, names)
                return out, frozenset(names), None
            content_encoding = sniffed  # compressed with no header saying so: look inside all the same
        # Held whole (it is in memory already): returned as given unless a secret is really inside.
        stream = StreamRedactor(self._search, content_encoding, hold_max=len(body))
        out = stream.feed(body) + stream.flush()
        if not stream.redacted:
            return body, frozenset(), stream.problem
        return out, stream.redacted, stream.problem

    def stream(self, content_encoding: str | None = None, hold_max: int = HOLD_MAX) -> StreamRedactor:
        """A redactor for one streamed body, fed chunk by chunk with memory bounded (see StreamRedactor)."""
        return StreamRedactor(self._search, content_encoding, hold_max)


def _redact_credential(header: str, value: bytes, own: frozenset[bytes]) -> bytes:
    """One auth header's value with its credential parts replaced by `[REDACTED]`.

    A part that already reads exactly `[NAME]` of a configured secret is kept: it says more.
    """

    def hide(part: bytes) -> bytes:
        return part if part in own or not part else REDACTED

    if header in _SCHEMED:
        scheme, sep, rest = value.partition(b" ")
        if sep and rest.strip():
            lead = len(rest) - len(rest.lstrip(b" "))
            return scheme + sep + rest[:lead] + hide(rest[lead:].rstrip(b" "))
        return hide(value)
    if header in ("cookie", "set-cookie"):
        parts = value.split(b";")
        # Cookie: every pair is a cookie. Set-Cookie: only the first is; the rest are attributes.
        count = len(parts) if header == "cookie" else 1
        for i in range(count):
            key, eq, val = parts[i].partition(b"=")
            if eq:
                core = val.strip(b" ")
                lead = len(val) - len(val.lstrip(b" "))
                parts[i] = key + eq + val[:lead] + hide(core) + val[lead + len(core) :]
            elif parts[i].strip():
                parts[i] = hide(parts[i])
        return b";".join(parts)
    return hide(value)
