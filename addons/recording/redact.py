"""Secret redaction: configured secret values become `[NAME]` before anything reaches the Ledger.

This is one of the stated exceptions to exact bytes (DESIGN.md, Capture): in heads, URLs and bodies
(also inside gzip/deflate/br/zstd bodies, and in percent-, base64- and JSON-escaped spellings) every
configured secret value is replaced by its name in brackets, and the names replaced are returned so
they can be kept on the event. Credentials in well-known auth headers are redacted by default even
when they are not configured. Bytes that hold no secret are returned untouched, identical.

Pure functions over bytes (no mitmproxy): the capture writer thread calls them off the event loop.
The fast path, a body with no secret, is one `bytes.find` per distinct spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from addons.recording.encoded_forms import encoded_forms
from addons.recording.encodings import Decoder, Encoder, parse_encodings
from addons.recording.errors import EncodingError, RedactError

#: Compressed bytes of a content-encoded stream held back, hoping to record them exact (see StreamRedactor).
HOLD_MAX = 8 * 1024 * 1024

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
        for name, value in sorted(secrets.items(), key=lambda kv: -len(kv[1])):
            if not value:
                raise RedactError(f"secret {name} has an empty value")
            for form in encoded_forms(value):
                owner.setdefault(form, name)
        self._owner = owner
        self._replacement = {form: b"[" + name.encode() + b"]" for form, name in owner.items()}
        # Longest first: at one position the longest spelling wins.
        self._forms = tuple(sorted(owner, key=len, reverse=True))
        self._pattern = re.compile(b"|".join(re.escape(f) for f in self._forms)) if owner else None
        #: Bytes a stream must hold back so a spelling split across chunks is still caught.
        self.holdback = max((len(f) for f in self._forms), default=1) - 1
        self._own = frozenset(b"[" + n.encode() + b"]" for n in self._names)

    # -- the core: find and replace spellings ---------------------------------------------------------

    def _present(self, data: bytes) -> bool:
        """Whether any spelling occurs: the cheap check that decides the fast path.

        Measured: on short inputs (heads) one regex search is several times faster than a
        `bytes.find` per spelling; on long ones (bodies) the finds win by 2-3x.
        """
        if len(data) < 2048:
            return self._pattern is not None and self._pattern.search(data) is not None
        return any(form in data for form in self._forms)

    def _sub(self, data: bytes, names: set[str]) -> bytes:
        """Every spelling replaced, collecting the secret names replaced into `names`."""
        if self._pattern is None or not self._present(data):
            return data

        def replace(match: re.Match[bytes]) -> bytes:
            form = match.group(0)
            names.add(self._owner[form])
            return self._replacement[form]

        return self._pattern.sub(replace, data)

    def _sub_prefix(self, data: bytes, limit: int, names: set[str]) -> tuple[bytes, int]:
        """Replacements in data[:cut], where cut >= limit is the first position safe to cut at.

        Matches starting at or after `limit` are left alone: they may continue into the next chunk,
        and will be found again once it has arrived.
        """
        assert self._pattern is not None
        pieces: list[bytes] = []
        pos = 0
        for match in self._pattern.finditer(data):
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
        if self.redact_auth_headers:
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
            names: set[str] = set()
            out = self._sub(body, names)
            return out, frozenset(names)
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


class _Plain:
    """Search-and-replace over a stream of plain bytes, holding back a tail between chunks."""

    def __init__(self, redactor: Redactor, names: set[str]) -> None:
        self._r = redactor
        self._tail = b""
        self.names = names

    def feed(self, chunk: bytes) -> bytes:
        r = self._r
        if r._pattern is None:
            return chunk
        data = self._tail + chunk if self._tail else chunk
        limit = len(data) - r.holdback
        if limit <= 0:
            self._tail = data
            return b""
        if not r._present(data):
            self._tail = data[limit:]
            return data[:limit]
        out, cut = r._sub_prefix(data, limit, self.names)
        self._tail = data[cut:]
        return out

    def flush(self) -> bytes:
        tail, self._tail = self._tail, b""
        return self._r._sub(tail, self.names)


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
    stops decoding part way, `decode_failed` is set: with no secret seen the bytes are then searched
    as they are; after a secret, the re-encoded part that did decode is kept and the rest dropped.
    """

    def __init__(
        self, redactor: Redactor, content_encoding: str | None = None, hold_max: int = HOLD_MAX
    ) -> None:
        self._r = redactor
        self._names: set[str] = set()
        self._plain = _Plain(redactor, self._names)
        try:
            codings = parse_encodings(content_encoding)
        except EncodingError:
            codings = ()
        self._codings = codings
        self._mode = "hold" if codings and redactor._pattern is not None else "plain"
        self._hold_max = hold_max
        self._held: list[bytes] = []
        self._held_size = 0
        self._scan_decoder = Decoder(codings) if self._mode == "hold" else None
        self._scan = _Plain(redactor, self._names)
        self._decoder: Decoder | None = None
        self._encoder: Encoder | None = None
        #: True when a content-encoded stream stopped decoding part way.
        self.decode_failed = False

    @property
    def redacted(self) -> frozenset[str]:
        return frozenset(self._names)

    def feed(self, chunk: bytes) -> bytes:
        """The redacted bytes that can be recorded now (possibly empty)."""
        if self._mode == "plain":
            return self._plain.feed(chunk)
        if self._mode == "transcode":
            return self._transcode(chunk)
        self._held.append(chunk)
        self._held_size += len(chunk)
        assert self._scan_decoder is not None
        try:
            for piece in self._scan_decoder.feed(chunk):
                self._scan.feed(piece)  # searching only: the output is not kept
        except EncodingError:
            return self._after_scan_error()
        if self._names or self._held_size > self._hold_max:
            return self._start_transcoding()
        return b""

    def flush(self) -> bytes:
        """The rest, at the end of the stream."""
        if self._mode == "plain":
            return self._plain.flush()
        if self._mode == "hold":
            assert self._scan_decoder is not None
            try:
                for piece in self._scan_decoder.finish():
                    self._scan.feed(piece)
            except EncodingError:
                return self._after_scan_error() + self.flush()
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
            except EncodingError:
                return b"".join(out) + self._give_up_decoding()
            encoder = self._encoder_for()
            out.append(encoder.feed(self._plain.flush()))
            out.append(encoder.finish())
            self._decoder = None
            return b"".join(out)
        return self._plain.flush()

    def _after_scan_error(self) -> bytes:
        """The held bytes would not decode: search them raw, unless a secret was already seen."""
        self.decode_failed = True
        if self._names:
            return self._start_transcoding()
        self._mode = "plain"
        held, self._held = self._held, []
        return self._plain.feed(b"".join(held))

    def _start_transcoding(self) -> bytes:
        self._mode = "transcode"
        self._decoder = Decoder(self._codings)
        held, self._held = self._held, []
        return self._transcode(b"".join(held))

    def _transcode(self, chunk: bytes) -> bytes:
        if self._decoder is None:  # decoding gave up: raw bytes from here on
            return self._plain.feed(chunk)
        out: list[bytes] = []
        try:
            for piece in self._decoder.feed(chunk):
                # The encoder is made once the first bytes decoded: raw deflate is known by then.
                out.append(self._encoder_for().feed(self._plain.feed(piece)))
        except EncodingError:
            return b"".join(out) + self._give_up_decoding()
        return b"".join(out)

    def _encoder_for(self) -> Encoder:
        if self._encoder is None:
            raw_deflate = self._decoder.raw_deflate if self._decoder is not None else False
            self._encoder = Encoder(self._codings, raw_deflate=raw_deflate)
        return self._encoder

    def _give_up_decoding(self) -> bytes:
        """After a decoding error: close what was encoded so far; search raw bytes from the next chunk.

        The chunk that failed is dropped, not recorded raw: its bytes may still carry, compressed,
        content that was already found to hold a secret.
        """
        self.decode_failed = True
        encoder = self._encoder_for()
        head = encoder.feed(self._plain.flush()) + encoder.finish()
        self._decoder = None
        return head
