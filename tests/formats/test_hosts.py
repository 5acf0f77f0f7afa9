"""The one host language (`formats.hosts`): every spelling of an address is that address, names
compare in IDNA and Unicode alike, and what is neither is an error rather than a guess."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from formats.hosts import HostError, match, normalize_host, parse_pattern


def inet_aton_spellings(address: str) -> list[str]:
    """Every way inet_aton reads `address`: one to four parts (the last filling what is left), each
    part decimal, octal (a leading 0) or hex (0x, either case)."""
    value = int(ipaddress.IPv4Address(address))
    spelled = []
    for parts in (1, 2, 3, 4):
        numbers = [(value >> (8 * (3 - i))) & 0xFF for i in range(parts - 1)]
        numbers.append(value & ((1 << (8 * (5 - parts))) - 1))
        for base in (str, lambda n: "0" + oct(n)[2:], hex, lambda n: hex(n).upper().replace("0X", "0X")):
            spelled.append(".".join(base(n) for n in numbers))
    return spelled


def test_every_inet_aton_spelling_is_the_address_the_resolver_reaches() -> None:
    """For each spelling of 127.0.0.1 and 10.1.2.3 (one to four parts, decimal, octal, hex), the
    system's inet_aton and `normalize_host` agree on the address (so the judge decides on where the
    bytes really go); the IPv4-mapped IPv6 spellings are the IPv4 address too."""
    for address in ("127.0.0.1", "10.1.2.3", "255.255.255.255", "0.0.0.0"):
        spellings = inet_aton_spellings(address)
        assert len(set(spellings)) >= 10
        for spelled in spellings:
            assert socket.inet_ntoa(socket.inet_aton(spelled)) == address, spelled
            assert normalize_host(spelled) == address, spelled
        v4 = ipaddress.IPv4Address(address)
        for mapped in (
            f"::ffff:{address}",
            f"[::ffff:{address}]",
            str(ipaddress.IPv6Address(f"::ffff:{v4}")),
        ):
            assert normalize_host(mapped) == address, mapped
        assert normalize_host(address + ".") == address


@st.composite
def aton_spelling(draw: st.DrawFn) -> str:
    """An IPv4 address in a random inet_aton spelling: parts, bases, padding zeros, hex case."""
    value = draw(st.integers(0, 2**32 - 1))
    parts = draw(st.integers(1, 4))
    numbers = [(value >> (8 * (3 - i))) & 0xFF for i in range(parts - 1)]
    numbers.append(value & ((1 << (8 * (5 - parts))) - 1))
    out = []
    for n in numbers:
        base = draw(st.sampled_from(["dec", "oct", "hex"]))
        zeros = "0" * draw(st.integers(0, 3))
        if base == "dec" and n:
            out.append(str(n))
        elif base == "dec" or base == "oct":
            out.append("0" + zeros + oct(n)[2:])
        else:
            digits = zeros + hex(n)[2:]
            out.append(draw(st.sampled_from(["0x", "0X"])) + draw(st.sampled_from([digits, digits.upper()])))
    return ".".join(out)


@given(aton_spelling())
@example("0x7f000001")
@example("0177.1")
def test_property_any_inet_aton_spelling_canonicalises_to_its_address(spelled: str) -> None:
    """Property: whatever spelling inet_aton accepts, `normalize_host` gives the same address."""
    expected = socket.inet_ntoa(socket.inet_aton(spelled))
    assert normalize_host(spelled) == expected


@given(st.text(alphabet="0123456789xXabcdefABCDEF.", min_size=1, max_size=20))
def test_property_numeric_text_is_the_address_inet_aton_reads_or_no_address(text: str) -> None:
    """Property over arbitrary numeric-looking text: when inet_aton accepts it, `normalize_host` is
    that address; when it does not, the text is not taken for another address (an error, or a name
    when a label is not a number)."""
    try:
        expected: str | None = socket.inet_ntoa(socket.inet_aton(text))
    except OSError:
        expected = None
    try:
        got: str | None = normalize_host(text)
    except HostError:
        got = None
    if expected is not None:
        assert got == expected
    elif got is not None and _is_v4(got):
        # beyond inet_aton only what the URL standard also reads as one: a trailing dot, a bare 0x
        assert text.endswith(".") or "0x" in text.lower().split(".") or text.lower().endswith("0x")


def _is_v4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


IDN = [
    # (spelling, canonical)
    ("bücher.example", "xn--bcher-kva.example"),
    ("BÜCHER.EXAMPLE", "xn--bcher-kva.example"),
    ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("XN--BCHER-KVA.Example.", "xn--bcher-kva.example"),
    ("bücher\u3002example", "xn--bcher-kva.example"),  # ideographic full stop
    ("ｂücher．example", "xn--bcher-kva.example"),  # full-width letter and dot
    ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
    ("xn--r8jz45g.xn--zckzah", "xn--r8jz45g.xn--zckzah"),
    ("xn--strae-oqa.de", "xn--strae-oqa.de"),  # IDNA 2008's ß: kept as written, its own name
]


@pytest.mark.parametrize(("spelled", "canonical"), IDN)
def test_names_in_unicode_and_punycode_are_one_name(spelled: str, canonical: str) -> None:
    """A name is its IDNA A-labels, lower case, without a trailing dot: the Unicode form mitmproxy
    hands over and the punycode a rule may be written in are the same host."""
    assert normalize_host(spelled) == canonical


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        "a..b",
        "exa mple.com",
        "999.1.1.1",
        "1.2.3.4.5",
        "08.1.1.1",
        "[::1",
        "::g",
        "a/b",
        "x@y",
        "-" * 64,
    ],
)
def test_what_is_neither_a_name_nor_an_address_is_an_error(bad: str) -> None:
    """Empty, spaced, numeric-but-no-address (a resolver would ask DNS for it: no registry hands out
    such a name), malformed IPv6: `HostError`, never a host that some rule might happen to match."""
    with pytest.raises(HostError):
        normalize_host(bad)


@pytest.mark.parametrize(
    ("pattern", "host", "port", "named"),
    [
        ("api.example.com", "API.example.com.", None, True),
        ("api.example.com", "x.api.example.com", None, False),
        ("*.example.com", "a.b.example.com", None, True),
        ("*.example.com", "example.com", None, False),
        (".example.com", "example.com", None, True),
        (".example.com", "notexample.com", None, False),
        ("api-*.example.com", "api-eu.example.com", None, True),
        ("*", "anything.test", None, True),
        ("10.0.0.0/8", "012.0x1.2.3", None, True),
        ("0x0a000000/8", "10.9.9.9", None, True),
        ("::ffff:10.0.0.0/104", "10.1.1.1", None, True),
        ("fd00::/8", "[FD12::1]", None, True),
        ("[::1]:8443", "::1", 8443, True),
        ("[::1]:8443", "::1", 443, False),
        ("api.example.com:8443", "api.example.com", None, False),
        ("*.bücher.example", "api.xn--bcher-kva.example", None, True),
        ("*.xn--bcher-kva.example", "API.BÜCHER.example", None, True),
        ("127.0.0.1", "not a host", None, False),
    ],
)
def test_patterns_name_their_hosts_in_any_spelling(
    pattern: str, host: str, port: int | None, named: bool
) -> None:
    """Each pattern kind (name, subdomains, domain, glob, any, address, network, port) names exactly
    its hosts, whichever spelling the pattern and the host are written in."""
    assert match(pattern, host, port) is named


@pytest.mark.parametrize(
    "bad", ["", "*.1.2.3.4", "10.0.0.0/33", "[a.b]", "ex ample.com", "bü*.example", "h:99999"]
)
def test_a_malformed_pattern_is_an_error_naming_it(bad: str) -> None:
    """A pattern that names no host (an address's subdomains, a bad prefix, a non-ASCII wildcard
    label, a port out of range) is refused when read, never read as something narrower."""
    with pytest.raises(HostError):
        parse_pattern(bad)
