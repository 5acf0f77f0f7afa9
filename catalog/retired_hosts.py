"""Refused (retired) hosts: a contract that can reach one is refused by construction.

A catalog that can quietly reach an old system is a catalog with an unlisted door, so the check looks
everywhere a host can hide, not only in the URL: header values, bodies (JSON nested at any depth,
JSON-RPC `params` included), shell commands (CLI lists and strings, `sh -c "curl ..."` included),
relay URLs (a URL carried in a query parameter of another URL), percent-encoded once or twice or not
at all, JSON-escaped (`\\/`, `\\u002e`), split by shell quoting (`ol''d.example`), in any letter
case. A refused host covers its subdomains: refusing `old.example` refuses `api.old.example`, never
`notold.example` or `old.example.org`.

The error names the host and where it hid, e.g.
`refused host "old.example" in upstream.body → JSON params.url → relay URL query parameter "u"
(percent-encoded twice)`.

The list is configured in `FLIGHTLOG_HOME/refused_hosts.txt`, one host per line, `#` starting a
comment; it lives outside the Directory so that an agent writing rows cannot edit it. Each line is a
pattern of the one host language (`formats.hosts`, as egress rules and secrets' hosts write them): a
name (it and its subdomains; in Unicode or punycode alike), `*.name` or `.name`, an address in any
spelling, a network (`10.0.0.0/8`); a URL or a `:PORT` is read for its host (a retired host is
retired on every port). Names and addresses are found in text as written (both IDNA spellings of a
name); every host of a URL in the text is also read as a host, so an address spelled otherwise
(`http://2130706433/`) or inside a listed network is found too.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote_plus, urlsplit

from catalog.errors import CatalogError, RefusedHost
from formats.hosts import HostError, HostPattern, normalize_host, parse_pattern, split_port

FILE_NAME: Final = "refused_hosts.txt"
MAX_DEPTH: Final = 8
SHELL_MAX: Final = 64 * 1024
"""Texts up to this long are also read with shell quoting removed (commands are short; a large
body is not run by a shell, and unquoting it would cost more than the check is worth)."""
_IP: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_URL_HOST: Final = re.compile(
    r"(?i)(?:\b[a-z][a-z0-9+.-]*:)?//(?:[^\s/?#@\"'<>\\]*@)?(\[[^\]\s]*\]|[^\s/?#:\"'<>\\]+)"
)
"""The host of each URL in a text (`//host`, after any user info)."""
_JSON_ESCAPE: Final = re.compile(r"\\u([0-9a-fA-F]{4})")
_ENCODINGS: Final = ("", "percent-encoded", "percent-encoded twice", "percent-encoded three times")


@dataclass(frozen=True)
class RefusedHosts:
    """The configured list of refused hosts, read as host patterns, and the one regular expression
    that finds the names and addresses of them written in a text."""

    hosts: tuple[str, ...] = ()
    """The list's entries, canonical (`formats.hosts`): a name, `*.name`, `.name`, an address, a network."""
    patterns: tuple[HostPattern, ...] = field(default=(), init=False, repr=False, compare=False)
    pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        patterns = {p.text: p for p in (read_entry(h) for h in self.hosts if h.strip())}
        object.__setattr__(self, "hosts", tuple(sorted(patterns)))
        object.__setattr__(self, "patterns", tuple(patterns[h] for h in sorted(patterns)))
        literal = sorted({text for p in self.patterns for text in _spellings(p)})
        object.__setattr__(self, "pattern", _pattern(tuple(literal)) if literal else None)

    def __bool__(self) -> bool:
        return bool(self.hosts)

    def covering(self, host: str) -> str | None:
        """The entry that retires canonical `host` (itself, or a name it lies under), else None."""
        return next((p.text for p in self.patterns if p.covers(host)), None)

    def find_in_text(self, text: str) -> tuple[str, str, str] | None:
        """The first refused host in a text under any of its decodings: (listed host, how it was
        encoded, the decoded text)."""
        if not self.patterns:
            return None
        for label, variant in decodings(text):
            lowered = variant.lower()
            if self.pattern is not None:
                for match in self.pattern.finditer(lowered):
                    if _starts_a_host(lowered, match) and (entry := self._entry_of(lowered, match)):
                        return entry, label, variant
            for match in _URL_HOST.finditer(variant):
                try:
                    host = normalize_host(match.group(1))
                except HostError:
                    continue
                if (entry := self.covering(host)) is not None:
                    return entry, label, variant
        return None

    def _entry_of(self, text: str, match: re.Match[str]) -> str | None:
        """The entry a name or address found as written in a text stands for: a `*.name` entry
        only when a subdomain's dot comes before it."""
        try:
            host = normalize_host(match.group("host"))
        except HostError:
            return None
        found = self.covering(host)
        if found is None and match.start() and text[match.start() - 1] == ".":
            found = self.covering("sub." + host)
        return found

    def check(self, value: Any, where: str = "the contract") -> None:
        """Raise `RefusedHost` naming the host and where it hid, when `value` reaches one.

        `value` is a contract, a rendered request, an array of those, a tool (its upstream), a
        string or bytes.
        """
        if not self.hosts:
            return
        upstream = getattr(value, "upstream", _NOTHING)
        if upstream is not _NOTHING:
            value, where = upstream, f"{getattr(value, 'name', 'tool')}.upstream"
        hit = self._locate(value, where, 0)
        if hit is not None:
            raise RefusedHost(*hit)

    def _locate(self, value: Any, where: str, depth: int) -> tuple[str, str] | None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                hit = self._locate(key, f"{where} (a key)", depth) or self._locate(
                    item, _join(where, str(key)), depth
                )
                if hit:
                    return hit
            return None
        if isinstance(value, list | tuple):
            for i, item in enumerate(value):
                hit = self._locate(item, f"{where}[{i}]", depth)
                if hit:
                    return hit
            return None
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8", errors="replace")
        if not isinstance(value, str):
            return None
        found = self.find_in_text(value)
        if found is None:
            return None
        host, encoding, decoded = found
        here = f"{where} ({encoding})" if encoding else where
        if depth < MAX_DEPTH:
            readings = [(value, where)] + ([(decoded, here)] if decoded != value else [])
            for text, at in readings:
                for label, inner in _views(text):
                    hit = self._locate(inner, f"{at} → {label}", depth + 1)
                    if hit:
                        return hit
        return host, here


_NOTHING: Final = object()


def read_entry(text: str) -> HostPattern:
    """One entry of the list as a host pattern (canonical `text`): a URL or `:PORT` read for its host."""
    given = text.strip()
    try:
        if "://" in given:
            given = urlsplit(given).netloc.rpartition("@")[2]
        body, _ = split_port(given)
        found = parse_pattern(body)
    except (HostError, ValueError) as e:
        raise CatalogError(f'"{text.strip()}" is not a host a refused-hosts list can hold ({e})') from e
    if found.kind in ("any", "glob"):
        raise CatalogError(f'"{text.strip()}": a refused-hosts list names hosts, domains or networks')
    canonical = {"suffix": "*." + found.name, "domain": "." + found.name}.get(found.kind, found.name)
    return HostPattern(canonical, found.kind, found.name, None, found.network, found.regex)


def _spellings(pattern: HostPattern) -> tuple[str, ...]:
    """How a name or address may be written in a text as is: a name in punycode and in Unicode."""
    if pattern.kind == "network":
        return ()
    if pattern.kind == "address":
        return (pattern.name,)
    try:
        unicode = pattern.name.encode("ascii").decode("idna").lower()
    except UnicodeError:
        return (pattern.name,)
    return tuple({pattern.name, unicode})


def load_refused_hosts(home: Path) -> RefusedHosts:
    """The list kept in `home/refused_hosts.txt`; none when the file does not exist."""
    path = home / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RefusedHosts()
    except OSError as e:
        raise CatalogError(f"cannot read {path}: {e.strerror}") from e
    return RefusedHosts(tuple(parse_refused_hosts(text)))


def parse_refused_hosts(text: str) -> Iterator[str]:
    """Hosts from the file's text: one per line, `#` starts a comment."""
    for line in text.splitlines():
        host = line.split("#", 1)[0].strip()
        if host:
            yield host


def check(value: Any, hosts: RefusedHosts | Iterable[str], where: str = "the contract") -> None:
    """Refuse `value` (contract, request, tool, text) when it reaches any of `hosts`."""
    listed = hosts if isinstance(hosts, RefusedHosts) else RefusedHosts(tuple(hosts))
    listed.check(value, where)


def _pattern(hosts: tuple[str, ...]) -> re.Pattern[str]:
    """The hosts as one alternation (longest first), ending where a host name ends; the start is
    checked by `_starts_a_host`, which is much faster than a look-behind on large bodies."""
    alt = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
    return re.compile(rf"(?P<host>{alt})(?![a-z0-9_-]|\.[a-z0-9])")


def _starts_a_host(text: str, match: re.Match[str]) -> bool:
    """A name may follow a subdomain's dot (`api.old.example`), never a letter (`notold.example`);
    an IP address follows neither."""
    before = text[match.start() - 1] if match.start() else " "
    allowed_dot = not _IP.match(match.group("host"))
    return not (before.isalnum() or before in "_-" or (before == "." and not allowed_dot))


def decodings(text: str) -> Iterator[tuple[str, str]]:
    """The text as written, JSON-unescaped, percent-decoded up to three times, and (up to
    `SHELL_MAX` characters) with shell quoting removed up to three levels deep (`ol''d.example`)."""
    seen: set[str] = set()
    current = text
    for label in _ENCODINGS:
        for variant in (current, _unescape_json(current)):
            if variant not in seen:
                seen.add(variant)
                yield label, variant
        decoded = unquote_plus(current)
        if decoded == current:
            break
        current = decoded
    shell = text
    for _ in range(3 if len(text) <= SHELL_MAX and any(c in text for c in "'\"\\") else 0):
        try:
            unquoted = " ".join(shlex.split(shell))
        except ValueError:
            return
        if unquoted == shell:
            return
        shell = unquoted
        if shell not in seen:
            seen.add(shell)
            yield "shell-quoted", shell


def _unescape_json(text: str) -> str:
    text = text.replace("\\/", "/")
    return _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _views(text: str) -> Iterator[tuple[str, Any]]:
    """Narrower readings of a text that holds a host, to say where exactly it hid."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        parsed = _json_or_none(stripped)
        if parsed is not None:
            yield "JSON", parsed
    if re.match(r"^[a-z][a-z0-9+.-]*://", stripped, re.I) and " " not in stripped:
        for pair in urlsplit(stripped).query.split("&"):
            key, _, value = pair.partition("=")
            yield f'relay URL query parameter "{unquote_plus(key)}"', value
        return
    if " " in stripped:
        try:
            words = shlex.split(stripped)
        except ValueError:
            words = stripped.split()
        if len(words) > 1:
            for i, word in enumerate(words):
                yield f"shell word {i}", word


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key) else f"{where}[{key!r}]"
