"""The search at the heart of redaction: every spelling of every configured secret, found and replaced.

`Redactor` (heads, URLs, whole bodies) and `StreamRedactor` (a body chunk by chunk) both search with
one `SecretSearch`. The fast path, bytes with no secret, is one `bytes.find` per common spelling,
plus one pass that finds no run of characters the rarer spellings are made of (and so skips them).
Pure functions over bytes (no mitmproxy).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from recording.errors import RedactError
from recording.redaction.encoded_forms import RUN_ALPHABET, gated_forms, plain_forms

_RUNS = bytes(1 if i in RUN_ALPHABET else 0 for i in range(256))
"""Maps the characters rarer spellings are made of to 1, all others to 0 (for `bytes.translate`)."""


class SecretSearch:
    """Finds and replaces every spelling of the configured secrets in bytes.

    Built once from the secrets; thread-safe to use (it holds no per-call state but a cache of
    compiled patterns, which a race only fills twice).
    """

    def __init__(self, secrets: Mapping[str, str]) -> None:
        names = frozenset(secrets)
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
        self.forms = tuple(sorted(owner, key=len, reverse=True))
        self.pattern = re.compile(b"|".join(re.escape(f) for f in self.forms)) if owner else None
        # The common spellings are searched always; the rarer (gated) ones only where a run of
        # their characters at least as long as the shortest of them occurs.
        self._common = tuple(f for f in self.forms if f not in gated)
        self._common_pattern = (
            re.compile(b"|".join(re.escape(f) for f in self._common)) if self._common else None
        )
        self._gated = tuple(f for f in self.forms if f in gated)
        self._run = b"\x01" * min((len(f) for f in self._gated), default=0)
        self._rank = {form: i for i, form in enumerate(self.forms)}
        self._found: dict[tuple[bytes, ...], re.Pattern[bytes]] = {}
        """Patterns of the spellings found together, compiled once (a thread may race another to
        fill an entry: both compile the same pattern)."""
        #: Bytes a stream must hold back so a spelling split across chunks is still caught.
        self.holdback = max((len(f) for f in self.forms), default=1) - 1
        self.own = frozenset(b"[" + n.encode() + b"]" for n in names)
        """The `[NAME]` of every secret: what a redacted value reads as."""

    def gate(self, data: bytes) -> bool:
        """Whether the rarer spellings can occur: a run of their characters long enough."""
        return bool(self._gated) and len(data) >= len(self._run) and self._run in data.translate(_RUNS)

    def matcher(self, data: bytes) -> re.Pattern[bytes] | None:
        """A pattern for the spellings that occur in `data`, or None (the fast path).

        On short inputs (heads) one regex search beats a `bytes.find` per spelling; on long ones
        (bodies) the finds win, and a pattern of only the spellings found replaces faster than one
        of all of them (`python -m bench.redact` measures the body cases).
        """
        if len(data) < 2048:
            if self._common_pattern is not None and self._common_pattern.search(data) is not None:
                return self.pattern
            if self.gate(data) and any(form in data for form in self._gated):
                return self.pattern
            return None
        found = [form for form in self._common if form in data]
        if self.gate(data):
            found += [form for form in self._gated if form in data]
        if not found:
            return None
        key = tuple(sorted(found, key=self._rank.__getitem__))  # longest first, as in forms
        pattern = self._found.get(key)
        if pattern is None:
            if len(self._found) > 256:
                self._found.clear()
            pattern = self._found[key] = re.compile(b"|".join(re.escape(f) for f in key))
        return pattern

    def present(self, data: bytes) -> bool:
        """Whether any spelling occurs."""
        return self.matcher(data) is not None

    def sub(self, data: bytes, names: set[str]) -> bytes:
        """Every spelling replaced, collecting the secret names replaced into `names`."""
        pattern = self.matcher(data) if self.pattern is not None else None
        if pattern is None:
            return data

        def replace(match: re.Match[bytes]) -> bytes:
            form = match.group(0)
            names.add(self._owner[form])
            return self._replacement[form]

        return pattern.sub(replace, data)

    def sub_prefix(
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
