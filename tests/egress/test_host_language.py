"""One host language where hosts are named: egress rules (allow and deny), secrets' hosts and
retired hosts agree on every spelling of every host, for every form of pattern.

The matrix is generated: each target host's spellings (an address in every inet_aton spelling and as
an IPv4-mapped IPv6 address; an IDN name in Unicode, punycode, upper case, with a trailing dot or a
full-width dot), times each pattern (name, wildcard, domain, address, network; written in Unicode or
punycode, in any address spelling), times each place the language is used. What each pattern names
is written down by hand below (`NAMES`), not worked out by the code under test.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog.errors import RefusedHost
from catalog.retired_hosts import RefusedHosts
from catalog.secret_hosts import SecretHostRefused, SecretHosts
from egress.policy_file import parse_policy
from egress.rules import Call
from tests.formats.test_hosts import inet_aton_spellings


def address_spellings(address: str) -> list[str]:
    v4 = ipaddress.IPv4Address(address)
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    return [*inet_aton_spellings(address), f"::ffff:{address}", f"[{mapped}]", mapped.exploded, address + "."]


def name_spellings(unicode: str, punycode: str) -> list[str]:
    return [
        unicode,
        unicode.upper(),
        punycode,
        punycode.upper() + ".",
        unicode.replace(".", "\u3002"),
        unicode.replace(".", "\uff0e"),
    ]


TARGETS: dict[str, list[str]] = {
    "loopback": address_spellings("127.0.0.1"),
    "ten": address_spellings("10.1.2.3"),
    "idn": name_spellings("bücher.example", "xn--bcher-kva.example"),
    "idn-sub": name_spellings("api.bücher.example", "api.xn--bcher-kva.example"),
    "other": ["plain.example", "Straße-Not.example", "PLAIN.example."],
}

# pattern -> the targets it names as an egress rule or a secret's host; retired hosts also cover
# a name's subdomains (`RETIRED_ALSO`)
NAMES: dict[str, set[str]] = {
    "127.0.0.1": {"loopback"},
    "0x7f000001": {"loopback"},
    "0177.0.0.1": {"loopback"},
    "127.0.0.0/8": {"loopback"},
    "0x7f.0/8": {"loopback"},
    "::ffff:127.0.0.0/104": {"loopback"},
    "10.0.0.0/8": {"ten"},
    "bücher.example": {"idn"},
    "xn--bcher-kva.example": {"idn"},
    "BÜCHER.example.": {"idn"},
    "*.bücher.example": {"idn-sub"},
    "*.xn--bcher-kva.example": {"idn-sub"},
    ".bücher.example": {"idn", "idn-sub"},
    ".xn--bcher-kva.example": {"idn", "idn-sub"},
    "*.example": {"idn", "idn-sub", "other"},
}
RETIRED_ALSO: dict[str, set[str]] = {
    "bücher.example": {"idn-sub"},
    "xn--bcher-kva.example": {"idn-sub"},
    "BÜCHER.example.": {"idn-sub"},
}


def url_host(spelled: str) -> str:
    """How a spelling goes in a URL: an IPv6 address in brackets."""
    return f"[{spelled}]" if ":" in spelled and not spelled.startswith("[") else spelled


def egress_deny(pattern: str, host: str) -> bool:
    """A deny rule naming `pattern` (default allow) refuses a request to `host`."""
    policy = parse_policy({"rule": [{"name": "r", "action": "deny", "hosts": pattern}]}, "t")
    return policy.judge(Call("http", host, 80, "GET", "/")).rule == "r"


def egress_allow(pattern: str, host: str) -> bool:
    """An allow rule naming `pattern` (default deny) lets a request to `host` through."""
    policy = parse_policy({"default": "deny", "rule": [{"action": "allow", "hosts": pattern}]}, "t")
    return policy.judge(Call("http", host, 80, "GET", "/")).action == "allow"


def egress_tunnel(pattern: str, host: str) -> bool:
    """A deny rule naming `pattern` refuses a tunnel to `host` before it opens."""
    policy = parse_policy({"rule": [{"name": "r", "action": "deny", "hosts": pattern}]}, "t")
    decision = policy.judge_host(Call("connect", host, 443, "CONNECT", ""))
    return decision is not None and decision.rule == "r"


def secret_host(pattern: str, host: str) -> bool:
    """A secret bound to `pattern` may be sent to `http://host/`."""
    contract = {"method": "GET", "url": f"http://{url_host(host)}/x", "headers": {"X-Key": "[KEY]"}}
    try:
        SecretHosts({"KEY": (pattern,)}).check(contract)
    except SecretHostRefused:
        return False
    return True


def retired_in_contract(pattern: str, host: str) -> bool:
    """A contract whose URL reaches `host` is refused when `pattern` is a retired host."""
    try:
        RefusedHosts((pattern,)).check({"method": "GET", "url": f"http://{url_host(host)}/x"})
    except RefusedHost:
        return True
    return False


def retired_in_policy(pattern: str, host: str, tmp: Path) -> bool:
    """The egress policy refuses a request to `host` when `pattern` is in refused_hosts.txt."""
    (tmp / "refused_hosts.txt").write_text(pattern + "\n", encoding="utf-8")
    policy = parse_policy({}, "t", home=tmp)
    return policy.judge(Call("http", host, 80, "GET", "/")).rule == "retired-hosts"


PLACES: dict[str, Callable[[str, str], bool]] = {
    "egress deny rule": egress_deny,
    "egress allow rule": egress_allow,
    "egress tunnel (CONNECT)": egress_tunnel,
    "secret's host": secret_host,
    "retired host in a contract": retired_in_contract,
}


@pytest.mark.parametrize("place", [*PLACES, "retired host in the policy"])
@pytest.mark.parametrize("pattern", list(NAMES))
def test_every_spelling_under_every_pattern_everywhere(place: str, pattern: str, tmp_path: Path) -> None:
    """For this place and pattern, every spelling of every target is named exactly when the pattern
    names its target (one language: no place reads a spelling another place would not)."""
    retired = place.startswith("retired")
    expected = NAMES[pattern] | (RETIRED_ALSO.get(pattern, set()) if retired else set())
    wrong = []
    for target, spellings in TARGETS.items():
        for spelled in spellings:
            if place == "retired host in the policy":
                named = retired_in_policy(pattern, spelled, tmp_path)
            else:
                named = PLACES[place](pattern, spelled)
            if named != (target in expected):
                wrong.append(f"{spelled!r} ({target}): {'named' if named else 'not named'}")
    assert not wrong, f"{place}, pattern {pattern!r}: " + "; ".join(wrong)


def test_the_matrix_is_as_large_as_it_says() -> None:
    """The enumeration stays an enumeration: spellings per address, name and pattern kind."""
    cells = sum(len(s) for s in TARGETS.values()) * len(NAMES) * (len(PLACES) + 1)
    assert len(TARGETS["loopback"]) >= 16 and cells >= 2500
