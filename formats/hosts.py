"""The one host language: how a host is read, written canonically and matched, wherever one is named.

Three lists name hosts (the egress rules, the hosts each secret may be sent to, the retired hosts),
and clients name the hosts they reach in many spellings. A decision on a host is only as good as
the agreement of the two, so every list and every judged host is read here, by one set of rules.

**A host, canonical** (`normalize_host`):

- an address, in any spelling the system resolver takes as one (`inet_aton`'s: `2130706433`,
  `0177.0.0.1`, `0x7f000001`, `127.1`; and IPv6 with or without brackets) is written as `ipaddress`
  writes it; an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is the IPv4 address it carries, since
  that is where its bytes go. A host whose every label is a number but that is no address
  (`999.1.1.1`) is an error, not a name: no registry hands out numeric names;
- a name is written in IDNA A-labels (punycode), lower case, without a trailing dot, exactly as
  mitmproxy encodes a host to connect to it (Python's `idna` codec): `BÜCHER.example`,
  `bücher.example.` and `xn--bcher-kva.example` are all `xn--bcher-kva.example`, and full-width
  letters and dots fold as IDNA folds them. A label already in punycode that does not decode and
  encode back to itself (an IDNA 2008 label with `ß`) is kept as written: it is its own name.

**A pattern** (`parse_pattern`), optionally followed by `:PORT` (`[::1]:443` for IPv6):

- `*`: every host (a stdio MCP call has none, so it never matches one);
- `api.example.com`: that name; `*.example.com`: its subdomains, not the domain itself;
  `.example.com`: the domain and each subdomain (as curl's `NO_PROXY` and Squid's `dstdomain`);
- `10.1.2.3`, `0x0a010203`, `::1`: that address; `10.0.0.0/8`, `fd00::/8`: a network (CIDR);
- any other `*`, `?` or `[...]`: a shell glob over the whole (canonical) name.

Patterns are written in any spelling their hosts may be, and compared canonically: a rule naming an
IDN host in Unicode matches its punycode spelling, a network matches every spelling of its addresses.
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import re
from dataclasses import dataclass
from typing import Final, Literal

from formats.errors import FormatError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
PatternKind = Literal["any", "exact", "suffix", "domain", "address", "network", "glob"]

_LABEL: Final = re.compile(r"^[a-z0-9_-]{1,63}$")
_GLOB_LABEL: Final = re.compile(r"^[a-z0-9_*?\[\]!-]+$")
_WILD: Final = re.compile(r"[*?\[]")
_NUMERIC_PART: Final = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_DOTS: Final = ("\u3002", "\uff0e", "\uff61")
"""The full stops IDNA reads as a dot between labels (ideographic, full-width, half-width)."""
_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
CACHE: Final = 8192


class HostError(FormatError, ValueError):
    """A host or a host pattern that is neither a name nor an address (the message says which)."""


# -- addresses ---------------------------------------------------------------------------------------


def parse_address(text: str) -> Address | None:
    """The address `text` spells (brackets, an IPv4 in any `inet_aton` spelling, IPv6 with a zone
    or not), or None when it spells a name. Raises `HostError` for a number that is no address."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    if ":" in body:
        try:
            found = ipaddress.IPv6Address(body.partition("%")[0])
        except ValueError as e:
            raise HostError(f"{text!r} is not an IPv6 address ({e})") from e
        mapped = found.ipv4_mapped
        return mapped if mapped is not None else found
    return _ipv4(body.removesuffix("."), text)


def _ipv4(body: str, text: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address as `inet_aton` reads it: one to four parts, each decimal, octal (a leading
    zero) or hexadecimal (a leading zero and x), the last filling the bytes that are left; None
    when a part is not a number."""
    parts = body.split(".")
    if not all(_NUMERIC_PART.match(p) for p in parts):
        return None
    if len(parts) > 4:
        raise HostError(f"{text!r} is numeric but has more than four parts: not an address")
    try:
        values = [_number(p) for p in parts]
    except ValueError as e:
        raise HostError(f"{text!r} is numeric but not an address ({e})") from e
    *front, last = values
    if any(v > 255 for v in front) or last >= 256 ** (5 - len(values)):
        raise HostError(f"{text!r} is numeric but a part is too large for an address")
    value = 0
    for v in front:
        value = value << 8 | v
    return ipaddress.IPv4Address(value << 8 * (5 - len(values)) | last)


def _number(part: str) -> int:
    if part[:2] in ("0x", "0X"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)  # a ValueError for 8 or 9, as inet_aton refuses them
    return int(part)


# -- names -------------------------------------------------------------------------------------------


def _label(label: str, text: str) -> str:
    """One label in its A-label form, lower case (module docstring)."""
    if label.isascii():
        lowered = label.lower()
        if lowered.startswith("xn--"):
            try:  # a punycode label stands for the Unicode one it round-trips with
                decoded = lowered.encode("ascii").decode("idna")
                lowered = decoded.encode("idna").decode("ascii").lower()
            except UnicodeError:
                pass  # not IDNA 2003's: kept as written, as mitmproxy keeps it
        if not _LABEL.match(lowered):
            raise HostError(f"{text!r} is not a host name (label {label!r})")
        return lowered
    try:
        encoded = label.encode("idna").decode("ascii").lower()
    except UnicodeError as e:
        raise HostError(f"{text!r} is not a host name ({e})") from e
    if not _LABEL.match(encoded):
        raise HostError(f"{text!r} is not a host name (label {label!r})")
    return encoded


def _name(body: str, text: str) -> str:
    for dot in _DOTS:
        body = body.replace(dot, ".")
    body = body.removesuffix(".")
    if not body:
        raise HostError(f"{text!r} is not a host name")
    name = ".".join(_label(label, text) for label in body.split("."))
    if len(name) > 253:
        raise HostError(f"{text!r} is longer than a host name may be")
    return name


@functools.lru_cache(maxsize=CACHE)
def normalize_host(text: str) -> str:
    """`text` (a host as a client, a header or a list spells it, without a port) written canonically
    (module docstring); `HostError` when it is neither a name nor an address."""
    body = text.strip()
    if not body:
        raise HostError("an empty host")
    for dot in _DOTS:
        body = body.replace(dot, ".")
    address = parse_address(body)
    if address is not None:
        return str(address)
    return _name(body, text)


def is_address(host: str) -> bool:
    """Whether a canonical host is an address (not a name)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def split_port(text: str) -> tuple[str, int | None]:
    """`host:443` -> (`host`, 443); an IPv6 address carries a port only in brackets (`[::1]:443`);
    `HostError` for a port that is not 1-65535."""
    raw = text.strip()
    if raw.startswith("["):
        close = raw.find("]")
        if close < 0:
            raise HostError(f"{text!r} opens a bracket it does not close")
        rest = raw[close + 1 :]
        if not rest:
            return raw[: close + 1], None
        if not rest.startswith(":"):
            raise HostError(f"{text!r} has something after its bracket that is not :PORT")
        return raw[: close + 1], _port(rest[1:], text)
    if raw.count(":") == 1:
        host, _, port = raw.partition(":")
        return host, _port(port, text)
    return raw, None


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise HostError(f"{whole!r} has no port between 1 and 65535 after its colon")
    return int(text)


# -- patterns ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One host pattern, read once (module docstring). `name` is what it indexes under: the
    canonical host (`exact`, `address`), the domain (`suffix`, `domain`), the network or glob text."""

    text: str
    kind: PatternKind
    name: str
    port: int | None = None
    network: Network | None = None
    regex: re.Pattern[str] | None = None

    def matches(self, host: str, port: int | None = None) -> bool:
        """Whether canonical `host` (`normalize_host`) on `port` is one this pattern names; a
        pattern with a port never names a host reached without one."""
        if self.port is not None and port != self.port:
            return False
        return self.matches_host(host)

    def matches_host(self, host: str) -> bool:
        """The host alone, whatever the port."""
        kind = self.kind
        if kind == "exact" or kind == "address":
            return host == self.name
        if kind == "any":
            return bool(host)  # every host, but a call that has none (a stdio tool call)
        if kind == "domain":
            return host == self.name or host.endswith("." + self.name)
        if kind == "suffix":
            return host.endswith("." + self.name)
        if kind == "network":
            assert self.network is not None
            address = _address_of(host)
            return address is not None and address in self.network
        assert self.regex is not None
        return self.regex.match(host) is not None

    def covers(self, host: str) -> bool:
        """Whether `host` is named by this pattern or lies under it: a name's subdomains are under
        it (what a list of retired hosts means by a name), an address's nothing else."""
        if self.kind == "exact":
            return host == self.name or host.endswith("." + self.name)
        return self.matches_host(host)


@functools.lru_cache(maxsize=CACHE)
def _address_of(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def parse_pattern(text: str) -> HostPattern:
    """One host pattern (module docstring); `HostError` naming what is wrong with it."""
    raw = text.strip()
    if not raw:
        raise HostError("an empty host pattern")
    body, port = split_port(raw)
    body = body.strip()
    if body == "*":
        return HostPattern(raw, "any", "*", port)
    if body.startswith("[") and body.endswith("]") and "/" not in body:
        return HostPattern(raw, "address", _canonical_address(body, raw), port)
    if "/" in body:
        network = _network(body, raw)
        return HostPattern(raw, "network", str(network), port, network=network)
    if _WILD.search(body.lstrip("*").lstrip(".")) is None and body.startswith(("*.", ".")):
        kind: PatternKind = "suffix" if body.startswith("*.") else "domain"
        domain = body[2:] if kind == "suffix" else body[1:]
        return HostPattern(raw, kind, _canonical_name(domain, raw), port)
    if _WILD.search(body):
        glob = _glob_name(body, raw)
        return HostPattern(raw, "glob", glob, port, regex=re.compile(fnmatch.translate(glob)))
    try:
        host = normalize_host(body)
    except HostError as e:
        raise HostError(f"{raw!r} is not a host pattern ({e})") from e
    return HostPattern(raw, "address" if is_address(host) else "exact", host, port)


def _canonical_address(body: str, raw: str) -> str:
    try:
        host = normalize_host(body)
    except HostError as e:
        raise HostError(f"{raw!r} is not a host pattern ({e})") from e
    if not is_address(host):
        raise HostError(f"{raw!r}: only an IPv6 address is written in brackets")
    return host


def _canonical_name(domain: str, raw: str) -> str:
    """The domain of a `*.x`/`.x` pattern: a name, never an address (an address has no subdomains)."""
    try:
        host = normalize_host(domain)
    except HostError as e:
        raise HostError(f"{raw!r} is not a host pattern ({e})") from e
    if is_address(host):
        raise HostError(f"{raw!r}: an address has no subdomains; write the address or a network")
    return host


def _network(body: str, raw: str) -> Network:
    address, _, bits = body.partition("/")
    address = address.strip().removeprefix("[").removesuffix("]")
    try:  # an IPv6 network keeps its own family here: a mapped one is made IPv4 below
        parsed = ipaddress.IPv6Address(address) if ":" in address else _ipv4(address, raw)
        if parsed is None or not bits.isdigit():
            raise HostError("not an address/prefix length")
        network = ipaddress.ip_network(f"{parsed}/{bits}", strict=False)
    except ValueError as e:
        raise HostError(f"{raw!r} is not a network ({e})") from e
    if isinstance(network, ipaddress.IPv6Network) and network.subnet_of(_MAPPED):
        # mapped addresses are canonically IPv4: so is a network of them
        v4 = ipaddress.IPv4Address(int(network.network_address) & 0xFFFFFFFF)
        return ipaddress.IPv4Network(f"{v4}/{network.prefixlen - 96}")
    return network


def _glob_name(body: str, raw: str) -> str:
    """A glob's labels: a label with a wildcard must be ASCII; the others are canonical."""
    out = []
    for label in body.removesuffix(".").split("."):
        if _WILD.search(label):
            lowered = label.lower()
            if not lowered.isascii() or not _GLOB_LABEL.match(lowered):
                raise HostError(f"{raw!r} is not a host pattern (a label with a wildcard is ASCII)")
            out.append(lowered)
        else:
            try:
                out.append(_label(label, raw))
            except HostError as e:
                raise HostError(f"{raw!r} is not a host pattern ({e})") from e
    return ".".join(out)


def match(pattern: str | HostPattern, host: str, port: int | None = None) -> bool:
    """Whether `pattern` names `host` (in any spelling) on `port`; an unreadable host is named by none."""
    found = pattern if isinstance(pattern, HostPattern) else parse_pattern(pattern)
    try:
        canonical = normalize_host(host)
    except HostError:
        return False
    return found.matches(canonical, port)
