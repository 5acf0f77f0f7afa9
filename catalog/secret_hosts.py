"""Secrets bound to the hosts they are for: a contract that would put one elsewhere is refused.

The door substitutes a secret's value into an outgoing request; a row that sends `[OPENAI_API_KEY]`
to `http://attacker/` would deliver the key to whoever wrote the row. So each secret names the hosts
it may be sent to, and before anything is bound the rendered contract is read for every place a
`[NAME]` would land:

- the request's own destination: its URL's host (and port), for a secret anywhere in the request
  (URL, userinfo, headers, body), an MCP server's URL likewise;
- any URL inside a text that carries the secret (a relay URL in the body, a header naming another
  server, a query parameter holding a URL), percent-encoded or JSON-escaped or not;
- a shell command: it can send the secret anywhere, so only a secret bound to `local` goes in one.

Host patterns (`SecretHosts`) are the one host language's (`formats.hosts`, as egress rules and
retired hosts write them): `api.example.com` (that host, any port), `api.example.com:8443` (that
port only; a URL without a port has its scheme's), `*.example.com` (its subdomains), `.example.com`
(the domain and its subdomains), an address in any spelling or a network; plus `local` (commands
run on this machine) and `*` (anywhere: the operator unbinds the secret on purpose). A URL's host
is compared canonically too: `http://2130706433/` reaches 127.0.0.1, `bücher.example` its punycode.

Known providers' keys are bound by default (`DEFAULTS`); any other secret goes nowhere until its
hosts are named (`NAME.hosts=...` in the secrets file). flightlog's own Ledger token goes only to
`flightlog.local`, whatever a file says.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from catalog.errors import CatalogError
from catalog.forms.upstream import SECRET
from catalog.retired_hosts import decodings
from formats.hosts import HostError, HostPattern, normalize_host, parse_pattern

DEFAULTS: Final[Mapping[str, tuple[str, ...]]] = {
    "OPENAI_API_KEY": ("api.openai.com",),
    "ANTHROPIC_API_KEY": ("api.anthropic.com",),
    "GEMINI_API_KEY": ("generativelanguage.googleapis.com",),
    "GOOGLE_API_KEY": ("generativelanguage.googleapis.com",),
    "MISTRAL_API_KEY": ("api.mistral.ai",),
    "GROQ_API_KEY": ("api.groq.com",),
    "OPENROUTER_API_KEY": ("openrouter.ai",),
    "DEEPSEEK_API_KEY": ("api.deepseek.com",),
    "XAI_API_KEY": ("api.x.ai",),
    "COHERE_API_KEY": ("api.cohere.com", "api.cohere.ai"),
    "TOGETHER_API_KEY": ("api.together.xyz",),
    "FIREWORKS_API_KEY": ("api.fireworks.ai",),
    "PERPLEXITY_API_KEY": ("api.perplexity.ai",),
    "GITHUB_TOKEN": ("api.github.com",),
    "HF_TOKEN": ("huggingface.co", "*.huggingface.co"),
}
"""Where the known providers' keys go when the secrets file names no hosts for them."""
OWN: Final[Mapping[str, tuple[str, ...]]] = {"FLIGHTLOG_LEDGER_TOKEN": ("flightlog.local",)}
"""flightlog's own credentials: fixed, never widened by a file."""
LOCAL: Final = "local"
ANYWHERE: Final = "*"
UNREADABLE: Final = "(unreadable)"
_URL: Final = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*:)?//[^\s\"'<>\\]+")
_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class SecretHostRefused(CatalogError):
    """A secret would reach a host it is not bound to."""

    def __init__(self, name: str, host: str, allowed: tuple[str, ...], where: str) -> None:
        bound = ", ".join(allowed) if allowed else f"nowhere yet (add {name}.hosts=HOST to the secrets file)"
        super().__init__(f"the secret {name} would reach {host} ({where}); it may go to {bound}")
        self.name, self.host = name, host


@dataclass(frozen=True, slots=True)
class Place:
    """Where a request would deliver something: a host and port, or this machine (`local`)."""

    host: str
    port: int | None = None

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def place_of(url: str) -> Place | None:
    """The host and port a URL reaches (its scheme's port when it names none); None when it names no
    host, `(unreadable)` when it cannot be read (which no pattern but `*` allows)."""
    try:
        split = urlsplit(SECRET.sub("secret", url.strip()))  # a `[NAME]` reads as an IPv6 bracket
        port = split.port
        if not split.hostname:
            return None
        host = normalize_host(split.hostname)
    except ValueError:  # HostError too: neither a name nor an address
        return Place(UNREADABLE)
    return Place(host, port if port is not None else _PORTS.get(split.scheme.lower()))


def allows(pattern: str, place: Place) -> bool:
    """Whether one host pattern (see the module docstring) allows `place`."""
    pattern = pattern.strip().lower()
    if pattern == ANYWHERE:
        return True
    if pattern == LOCAL or place.host == LOCAL:
        return pattern == place.host == LOCAL
    wanted = _pattern(pattern)
    return wanted is not None and place.host != UNREADABLE and wanted.matches(place.host, place.port)


@functools.lru_cache(maxsize=1024)
def _pattern(text: str) -> HostPattern | None:
    """A secret's host pattern (the secrets file's lines are checked when read: None allows nothing)."""
    try:
        return parse_pattern(text)
    except HostError:
        return None


@dataclass(frozen=True)
class SecretHosts:
    """Each secret's hosts: the file's `NAME.hosts` lines over the defaults, flightlog's own fixed."""

    named: Mapping[str, tuple[str, ...]]

    def of(self, name: str) -> tuple[str, ...]:
        if name in OWN:
            return OWN[name]
        return tuple(self.named.get(name, DEFAULTS.get(name, ())))

    def check(self, contract: Any) -> None:
        """Raise `SecretHostRefused` when a rendered contract (secrets still `[NAME]`) would deliver a
        secret to a place its hosts do not allow."""
        for i, part in enumerate(contract if isinstance(contract, list) else [contract]):
            if isinstance(part, Mapping):
                self._check_part(part, f"part {i + 1}" if isinstance(contract, list) else "the request")

    def _check_part(self, part: Mapping[str, Any], where: str) -> None:
        method = str(part.get("method", "")).upper()
        if method in ("CLI", "CODE"):
            destination: Place | None = Place(LOCAL)
        elif method == "MCP":
            server = part.get("server")
            destination = place_of(str(server.get("url", ""))) if isinstance(server, Mapping) else None
        else:
            destination = place_of(str(part.get("url", "")))
        for text, at in _texts(part, where):
            for name in {m.group(1) for m in SECRET.finditer(text)}:
                self._allow(name, destination or Place("(no host)"), f"{at}, the request's destination")
                for found, how in _urls_in(text):
                    self._allow(name, found, f"{at}, a URL in the same text{how}")

    def _allow(self, name: str, place: Place, where: str) -> None:
        hosts = self.of(name)
        if not any(allows(h, place) for h in hosts):
            raise SecretHostRefused(name, str(place), hosts, where)


def _texts(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string of a request with where it stands (keys included: a header's name can carry one)."""
    if isinstance(value, str):
        yield value, where
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key), f"{where}.{key}"
            yield from _texts(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _texts(item, f"{where}[{i}]")


def _urls_in(text: str) -> Iterator[tuple[Place, str]]:
    """The places the URLs in a text reach, under each of its decodings (percent, JSON escapes)."""
    for label, variant in decodings(text):
        for match in _URL.finditer(variant):
            place = place_of(match.group(0) if "//" in match.group(0)[:12] else "//" + match.group(0))
            if place is not None:
                yield place, f" ({label})" if label else ""
