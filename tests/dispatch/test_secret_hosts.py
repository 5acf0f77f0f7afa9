"""Host patterns of `catalog.secret_hosts`, case by case (the live test tries them through a proxy)."""

from __future__ import annotations

import pytest

from catalog.secret_hosts import Place, SecretHostRefused, SecretHosts, allows, place_of


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("api.example.com", "https://api.example.com/v1", True),
        ("api.example.com", "https://API.Example.com:8443/v1", True),  # no port in the pattern: any
        ("api.example.com:8443", "https://api.example.com/v1", False),  # https is 443
        ("api.example.com:443", "https://api.example.com/v1", True),
        ("api.example.com", "https://api.example.com.evil.example/", False),
        ("api.example.com", "https://evil-api.example.com/", False),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "https://example.com/", False),
        ("*.example.com", "https://notexample.com/", False),
        ("[::1]:8080", "http://[::1]:8080/", True),
        ("127.0.0.1", "http://localhost/", False),
        ("*", "http://anything.example/", True),
        ("local", "http://localhost/", False),
    ],
)
def test_a_pattern_allows_exactly_its_hosts(pattern: str, url: str, allowed: bool) -> None:
    """Hosts compare exactly (any letter case), ports only when the pattern names one (a URL without
    a port has its scheme's), `*.` is subdomains only; `local` is commands, never a URL's host."""
    place = place_of(url)
    assert place is not None and allows(pattern, place) is allowed


def test_commands_take_only_secrets_bound_to_local() -> None:
    """A shell command can send a secret anywhere: only `local` (or `*`) lets one in."""
    command = {"method": "CLI", "command": ["tool", "--key", "[A_KEY]"]}
    with pytest.raises(SecretHostRefused, match="A_KEY would reach local"):
        SecretHosts({"A_KEY": ("api.example.com",)}).check(command)
    SecretHosts({"A_KEY": ("local",)}).check(command)
    assert allows("local", Place("local")) and not allows("api.example.com", Place("local"))


def test_an_unreadable_url_reaches_nothing_a_pattern_allows() -> None:
    """A URL that cannot be read (a broken port) is refused rather than skipped."""
    with pytest.raises(SecretHostRefused, match="unreadable"):
        SecretHosts({"A_KEY": ("api.example.com",)}).check(
            {"method": "GET", "url": "https://api.example.com/", "headers": {"x": "http://h:99999/[A_KEY]"}}
        )
