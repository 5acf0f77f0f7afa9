"""Secret redaction: configured secret values become `[NAME]` before anything reaches the Ledger.

This is one of the stated exceptions to exact bytes (DESIGN.md, Capture): in heads, URLs and bodies
(also inside gzip/deflate/br/zstd bodies, gzip and zstd ones recognised by their magic bytes when no
Content-Encoding says so, and in percent-, base64-, JSON-escaped, hex, base64-of-base64 and
all-`\\uXXXX` spellings) every configured secret value is replaced by its name in brackets, and the
names replaced are returned so they can be kept on the event. Credentials in well-known auth headers
are redacted by default even when they are not configured. Bytes that hold no secret are returned
untouched, identical.

Pure functions over bytes (no mitmproxy): the capture writer thread calls them off the event loop.
The fast path, a body with no secret, is one `bytes.find` per common spelling, plus one pass that
finds no run of characters the rarer spellings are made of (and so skips them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from recording.encoded_forms import RUN_ALPHABET, gated_forms, plain_forms
from recording.encodings import parse_encodings, sniff
from recording.errors import EncodingError, RedactError
from recording.redact_stream import HOLD_MAX, StreamRedactor

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
_RUNS = bytes(1 if i in RUN_ALPHABET else 0 for i in range(256))
"""Maps the characters rarer spellings are made of to 1, all others to 0 (for `bytes.translate`)."""


_HEADER = re.compile(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+)(:[ \t]*)(.*?)([ \t]*)$", re.DOTALL)
_AUTH_LINE = re.compile(
    rb"\r\n(?:" + b"|".join(re.escape(h.encode()) for h in sorted(AUTH_HEADERS)) + rb"):", re.IGNORECASE
)
"""A header line `_HEADER` would read as one of AUTH_HEADERS (its name, then the colon at once): a
head without one needs no line-by-line look (measured: 7-14 us of a head's redaction, the writer's
largest single cost per request after the database)."""


class Redactor:
    """Replaces configured secrets (and, by default, auth header values) in recorded bytes.

    Built once from the secrets; thread-safe to use (it holds no per-call state).
    """

    def __init__(self, secrets: Mapping[str, str], redact_auth_headers: bool = True) -> None:
        self.redact_auth_headers = redact_auth_headers
        self._names = frozenset(secrets)
        # Each spelling points at the secret it spells. Longer values are claimed first, so a
        # secret containing another one is reported under its own name.
        owner: dict[bytes, str] = {}
        gated: set[bytes] = set()
        for name, value in sorted(secrets.items(), key=lambda kv: -len(kv[1])):
            if not value:
                raise RedactError(f"secret {name} has an empty value")
            common = plain_forms(value)
            for form in common:
                owner.setdefault(form, name)
            for form in gated_forms(value) - common:
                owner.setdefault(form, name)
                gated.add(form)
        self._owner = owner
        self._replacement = {form: b"[" + name.encode() + b"]" for form, name in owner.items()}
        # Longest first: at one position the longest spelling wins.
        self._forms = tuple(sorted(owner, key=len, reverse=True))
        self._pattern = re.compile(b"|".join(re.escape(f) for f in self._forms)) if owner else None
        # The common spellings are searched always; the rarer (gated) ones only where a run of
        # their characters at least as long as the shortest of them occurs.
        self._common = tuple(f for f in self._forms if f not in gated)
        self._common_pattern = (
            re.compile(b"|".join(re.escape(f) for f in self._common)) if self._common else None
        )
        self._gated = tuple(f for f in self._forms if f in gated)
        self._run = b"\x01" * min((len(f) for f in self._gated), default=0)
        self._rank = {form: i for i, form in enumerate(self._forms)}
        self._found: dict[tuple[bytes, ...], re.Pattern[bytes]] = {}
        """Patterns of the spellings found together, compiled once (a thread may race another to
        fill an entry: both compile the same pattern)."""
        #: Bytes a stream must hold back so a spelling split across chunks is still caught.
        self.holdback = max((len(f) for f in self._forms), default=1) - 1
        self._own = frozenset(b"[" + n.encode() + b"]" for n in self._names)

    # -- the core: find and replace spellings ---------------------------------------------------------

    def _gate(self, data: bytes) -> bool:
        """Whether the rarer spellings can occur: a run of their characters long enough."""
        return bool(self._gated) and len(data) >= len(self._run) and self._run in data.translate(_RUNS)

    def _matcher(self, data: bytes) -> re.Pattern[bytes] | None:
        """A pattern for the spellings that occur in `data`, or None (the fast path).

        Measured: on short inputs (heads) one regex search is several times faster than a
        `bytes.find` per spelling; on long ones (bodies) the finds win by 2-3x, and a pattern of
        only the spellings found replaces 10x faster than one of all of them.
        """
        if len(data) < 2048:
            if self._common_pattern is not None and self._common_pattern.search(data) is not None:
                return self._pattern
            if self._gate(data) and any(form in data for form in self._gated):
                return self._pattern
            return None
        found = [form for form in self._common if form in data]
        if self._gate(data):
            found += [form for form in self._gated if form in data]
        if not found:
            return None
        key = tuple(sorted(found, key=self._rank.__getitem__))  # longest first, as in _forms
        pattern = self._found.get(key)
        if pattern is None:
            if len(self._found) > 256:
                self._found.clear()
            pattern = self._found[key] = re.compile(b"|".join(re.escape(f) for f in key))
        return pattern

    def _present(self, data: bytes) -> bool:
        """Whether any spelling occurs."""
        return self._matcher(data) is not None

    def _sub(self, data: bytes, names: set[str]) -> bytes:
        """Every spelling replaced, collecting the secret names replaced into `names`."""
        pattern = self._matcher(data) if self._pattern is not None else None
        if pattern is None:
            return data

        def replace(match: re.Match[bytes]) -> bytes:
            form = match.group(0)
            names.add(self._owner[form])
            return self._replacement[form]

        return pattern.sub(replace, data)

    def _sub_prefix(
        self, data: bytes, limit: int, names: set[str], pattern: re.Pattern[bytes]
    ) -> tuple[bytes, int]:
        """Replacements in data[:cut], where cut >= limit is the first position safe to cut at.

        Matches starting at or after `limit` are left alone: they may continue into the next chunk,
        and will be found again once it has arrived.
        """
        pieces: list[bytes] = []
        pos = 0
        for match in pattern.finditer(data):
            if match.start() >= limit:
                break
            form = match.group(0)
            names.add(self._owner[form])
            pieces += (data[pos : match.start()], self._replacement[form])
            pos = match.end()
        cut = max(limit, pos)
        pieces.append(data[pos:cut])
        return b"".join(pieces), cut

    # -- public API -----------------------------------------------------------------------------------

    def redact_url(self, url: str) -> tuple[str, frozenset[str]]:
        """A URL with secret values (in any spelling) replaced by `[NAME]`."""
        names: set[str] = set()
        raw = url.encode("utf-8", "surrogateescape")
        out = self._sub(raw, names)
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
        out = self._sub(head, names)
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
                value = _redact_credential(header, match.group(3), self._own)
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
        if self._pattern is None or not body:
            return body, frozenset()
        try:
            codings = parse_encodings(content_encoding)
        except EncodingError:
            codings = ()
        if not codings:
            sniffed = sniff(body)
            if sniffed is None:
                names: set[str] = set()
                out = self._sub(body, names)
                return out, frozenset(names)
            content_encoding = sniffed  # compressed with no header saying so: look inside all the same
        # Held whole (it is in memory already): returned as given unless a secret is really inside.
        stream = StreamRedactor(self, content_encoding, hold_max=len(body))
        out = stream.feed(body) + stream.flush()
        if not stream.redacted:
            return body, frozenset()
        return out, stream.redacted

    def stream(self, content_encoding: str | None = None, hold_max: int = HOLD_MAX) -> StreamRedactor:
        """A redactor for one streamed body, fed chunk by chunk with memory bounded (see StreamRedactor)."""
        return StreamRedactor(self, content_encoding, hold_max)


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
