"""The patterns a policy rule matches with: hosts (names, subdomains, addresses, networks) and globs.

Hosts, as firewalls and proxies spell them:

- `api.example.com`: that host only; `*.example.com`: its subdomains, not the domain itself;
  `.example.com`: the domain and every subdomain (as curl's `NO_PROXY` and Squid's `dstdomain`);
- `10.1.2.3`, `::1`, `10.0.0.0/8`, `fd00::/8`: an address or a network (matches hosts given as addresses);
- any other `*`, `?` or `[...]`: a shell glob over the whole name; `*` alone: every host (a stdio
  MCP call has none, so a rule naming hosts never applies to one);
- each may end in `:PORT` (`[::1]:443` for an IPv6 address), then it matches that port only.

Names compare without regard to case or a trailing dot. Globs elsewhere (paths, agents, tools,
argument values) are shell globs in which `*` also crosses `/`; a glob without a wildcard is an
exact comparison, one ending in its only `*` a prefix test: the common cases cost a string compare.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal

from egress.errors import PolicyFileError

Matcher = Callable[[str], bool]
HostKind = Literal["any", "exact", "suffix", "domain", "network", "glob"]
_WILD: Final = re.compile(r"[*?\[]")
_NAME: Final = re.compile(r"^[a-z0-9_*?\[\]!-]+(\.[a-z0-9_*?\[\]!-]+)*$")


def glob(pattern: str) -> Matcher:
    """A matcher for one glob (see the module's docstring)."""
    if not _WILD.search(pattern):
        return pattern.__eq__
    if pattern.endswith("*") and not _WILD.search(pattern[:-1]):
        prefix = pattern[:-1]
        return lambda text: text.startswith(prefix)
    return re.compile(fnmatch.translate(pattern), re.DOTALL).match  # type: ignore[return-value]


def any_glob(patterns: Iterable[str]) -> Matcher:
    """A matcher for a list of globs: true when one of them matches."""
    matchers = tuple(glob(p) for p in patterns)
    if len(matchers) == 1:
        return matchers[0]
    return lambda text: any(m(text) for m in matchers)


def normalize_host(host: str) -> str:
    """A host as rules compare it: lower case, without brackets or a trailing dot."""
    return host.strip().strip("[]").rstrip(".").lower()


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One host pattern, read once: its kind, the name (or suffix) it indexes under, and a port."""

    text: str
    kind: HostKind
    name: str
    """`exact`: the host; `suffix`/`domain`: the domain (without the leading `*.` or `.`)."""
    port: int | None = None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    regex: re.Pattern[str] | None = None

    def matches(self, host: str, port: int | None) -> bool:
        """Whether `host` (normalized) on `port` is one this pattern names."""
        if self.port is not None and port != self.port:
            return False
        kind = self.kind
        if kind == "any":
            return bool(host)  # every host, but a call that has none (a stdio tool call)
        if kind == "exact":
            return host == self.name
        if kind == "domain":
            return host == self.name or host.endswith("." + self.name)
        if kind == "suffix":
            return host.endswith("." + self.name)
        if kind == "network":
            assert self.network is not None
            try:
                return ipaddress.ip_address(host) in self.network
            except ValueError:
                return False
        assert self.regex is not None
        return self.regex.match(host) is not None


def host_pattern(text: str, where: str) -> HostPattern:
    """Read one host pattern; a malformed one is an error naming `where` it was written."""
    raw = text.strip()
    if not raw:
        raise PolicyFileError(f"{where}: an empty host pattern")
    body, port = _split_port(raw, where)
    host = body.strip("[]").rstrip(".").lower()
    if host == "*":
        return HostPattern(raw, "any", "*", port)
    if "/" in host:
        try:
            return HostPattern(raw, "network", host, port, network=ipaddress.ip_network(host, strict=False))
        except ValueError as e:
            raise PolicyFileError(f"{where}: {raw!r} is not a network ({e})") from e
    if is_address(host):
        return HostPattern(raw, "exact", str(ipaddress.ip_address(host)), port)
    if not _NAME.match(host.lstrip(".")):
        raise PolicyFileError(f"{where}: {raw!r} is not a host pattern")
    if host.startswith("*.") and not _WILD.search(host[2:]):
        return HostPattern(raw, "suffix", host[2:], port)
    if host.startswith(".") and not _WILD.search(host[1:]):
        return HostPattern(raw, "domain", host[1:], port)
    if _WILD.search(host):
        regex = re.compile(fnmatch.translate(host))
        return HostPattern(raw, "glob", host, port, regex=regex)
    return HostPattern(raw, "exact", host, port)


def _split_port(raw: str, where: str) -> tuple[str, int | None]:
    """`host:443` -> (host, 443); an IPv6 address needs brackets to carry a port (`[::1]:443`)."""
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0:
            raise PolicyFileError(f"{where}: {raw!r} opens a bracket it does not close")
        rest = raw[close + 1 :]
        if not rest:
            return raw[: close + 1], None
        if not rest.startswith(":"):
            raise PolicyFileError(f"{where}: {raw!r} is not a host pattern")
        return raw[: close + 1], _port(rest[1:], raw, where)
    if raw.count(":") == 1:
        host, _, port = raw.partition(":")
        return host, _port(port, raw, where)
    return raw, None


def _port(text: str, raw: str, where: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise PolicyFileError(f"{where}: {raw!r} has no port between 1 and 65535 after its colon")
    return int(text)
